-- The sample data and the policies that isolate tenants. Run by setup.mjs as the table's
-- owner; :app_role is the role the data API connects as.
--
-- The data API sets, in every transaction, the verified claims of the viewer's embed token:
--   ugs.user_group_id  the token's sub
--   ugs.variables      its ugs_variables (JSON), e.g. {"region": "emea", ...}
-- The policies read them. Without them (a forgotten set_config, a pooled connection reused
-- after its transaction) current_setting(..., true) is NULL, and NULL matches no row.

create table orders (
  id            integer primary key,
  user_group_id text    not null,
  product       text    not null,
  amount        numeric not null
);

-- Rows every customer of a region may see, chosen by a variable rather than by the group id.
create table regional_notices (
  id     integer primary key,
  region text    not null,
  notice text    not null
);

alter table orders enable row level security;
alter table orders force row level security;
alter table regional_notices enable row level security;
alter table regional_notices force row level security;

create policy orders_of_the_viewer on orders
  for select
  using (user_group_id = current_setting('ugs.user_group_id', true));

create policy notices_of_the_viewers_region on regional_notices
  for select
  using (region = (nullif(current_setting('ugs.variables', true), '')::jsonb ->> 'region'));

-- The API's role: it can log in and read, nothing else. Not the owner (owners bypass RLS
-- unless it is forced, and could disable it), not a superuser, no BYPASSRLS.
grant select on orders, regional_notices to :"app_role";
