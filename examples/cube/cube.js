// Cube's configuration for User Group Service embed tokens (docs/verify-embed-tokens.md, "Cube (tested)").
// There is no checkAuth here, on purpose: a checkAuth replaces the verification that
// CUBEJS_JWK_URL, CUBEJS_JWT_ISSUER, CUBEJS_JWT_AUDIENCE and CUBEJS_JWT_ALGS configure.
// Cube verifies the token; its claims become the security context; every query is then
// kept to the token's account, environment and group.
const CLAIMS = ['ugs_account', 'ugs_environment', 'ugs_user_group_id'];

module.exports = {
  queryRewrite: (query, { securityContext }) => {
    // Every account of the service signs with the same keys: a signature says that the
    // service issued the token, ugs_account for whom. The same id in Customer and Testing
    // are two groups.
    for (const claim of CLAIMS) {
      if (typeof securityContext[claim] !== 'string') throw new Error(`the embed token has no ${claim}`);
    }
    query.filters = [
      ...(query.filters || []),
      { member: 'Orders.account', operator: 'equals', values: [securityContext.ugs_account] },
      { member: 'Orders.environment', operator: 'equals', values: [securityContext.ugs_environment] },
      { member: 'Orders.userGroupId', operator: 'equals', values: [securityContext.ugs_user_group_id] },
    ];
    return query;
  },
};
