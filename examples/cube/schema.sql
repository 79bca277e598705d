-- The rows of examples/cube: orders of two accounts (acme and globex), each with a group
-- of the id acme-corp, and acme's in both environments. Each embed token sees one line's rows.
create table orders (
  id integer primary key,
  account text not null,
  environment text not null check (environment in ('Customer', 'Testing')),
  user_group_id text not null,
  region text not null,
  amount integer not null
);

insert into orders (id, account, environment, user_group_id, region, amount) values
  (1, 'acme', 'Customer', 'acme-corp', 'emea', 100),
  (2, 'acme', 'Customer', 'acme-corp', 'amer', 250),
  (3, 'acme', 'Customer', 'acme-corp', 'emea', 40),
  (4, 'acme', 'Testing', 'acme-corp', 'emea', 7),
  (5, 'globex', 'Customer', 'acme-corp', 'apac', 9000),
  (6, 'acme', 'Customer', 'initech', 'emea', 300);
