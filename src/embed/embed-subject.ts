// The `sub` of an embed token (docs/api.md, "Embed tokens", "The subject"): one text that
// names one group of one account and environment, so that (`iss`, `sub`) is unique within the
// issuer, as RFC 7519 §4.1.2 asks. Every account shares one issuer and one key set: a `sub`
// that were the user_group_id alone would be the same for every account, and every
// environment, that has a group of that id.
//
// `<account slug>:<environment>:<user_group_id>`. The slug never holds a `:` (ACCOUNT_SLUG)
// and the environment is one of two words, so everything after the second `:` is the id as
// given, whatever it holds (`:` and `/` included). The id is also its own claim,
// `ugs_user_group_id`, so that no verifier has to split anything.
import { ACCOUNT_SLUG } from '../accounts/account-slug.ts';
import type { Environment } from '../db/schema.ts';

export function embedSubject(accountSlug: string, environment: Environment, userGroupId: string): string {
  // The encoding holds only for slugs of that form; the command-line tool and the first start
  // create no other. One that got into the table otherwise must not make a subject that
  // another account's could equal.
  if (!ACCOUNT_SLUG.test(accountSlug)) throw new Error(`the account slug ${JSON.stringify(accountSlug)} cannot name an embed token's subject`);
  return `${accountSlug}:${environment}:${userGroupId}`;
}
