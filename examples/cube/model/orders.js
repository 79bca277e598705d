// Every row says whose it is: the account's slug, the environment and the group's id
// (docs/verify-embed-tokens.md, "Cube (tested)"). cube.js filters every query by all three.
cube('Orders', {
  sql: 'SELECT * FROM orders',
  measures: {
    count: { type: 'count' },
    total: { sql: 'amount', type: 'sum' },
  },
  dimensions: {
    id: { sql: 'id', type: 'number', primaryKey: true, shown: true },
    account: { sql: 'account', type: 'string' },
    environment: { sql: 'environment', type: 'string' },
    userGroupId: { sql: 'user_group_id', type: 'string' },
    region: { sql: 'region', type: 'string' },
  },
});
