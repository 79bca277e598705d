// What an account's slug may be. Apart from the service so that `ugs` checks a slug it is
// given without loading the database's modules.

/** An account's slug: 1-63 characters of a-z, 0-9 and -, starting with a letter or digit. */
export const ACCOUNT_SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;
