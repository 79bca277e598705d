// How long a published key set may be cached, and so how long a new signing key is published
// before it signs. Apart from signing-keys.ts so that `ugs keys embed rotate --help` can say
// it without loading the signing code.

/** How long a verifier may cache the JWKS; shorter than the default activation delay. */
export const JWKS_MAX_AGE_SECONDS = 300;
/** A rotated-in key is published this long before it signs, so cached key sets learn it first. */
export const DEFAULT_ACTIVATION_SECONDS = 2 * JWKS_MAX_AGE_SECONDS;
