// Response serialization: Fastify's own compiler (fast-json-stringify, through
// @fastify/fast-json-stringify-compiler), each route's serializer built when it first
// serializes rather than when the route is added: building them all at once was much of a
// server's start (docs/performance.md, "The test suite"), and most processes answer a few
// routes: a command of the tool, a worker, a server of a test.
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';

type SerializerFactory = ReturnType<typeof SerializerSelector>;

/** Fastify's `schemaController.compilersFactory.buildSerializer`, each serializer built on first use. */
export function serializersBuiltOnFirstUse(): SerializerFactory {
  const buildFactory = SerializerSelector();
  return (externalSchemas, options) => {
    const build = buildFactory(externalSchemas, options);
    return (route) => {
      let serialize: ((doc: unknown) => string) | undefined;
      return (doc) => {
        serialize ??= build(route);
        return serialize(doc);
      };
    };
  };
}
