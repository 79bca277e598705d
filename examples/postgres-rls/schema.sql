-- The sample data and the policies that isolate tenants. Run by setup.mjs as the table's
-- owner; :app_role is the role the data API connects as.
--
-- The data API serves the embed tokens of one account (UGS_ACCOUNT): it refuses any other
-- account's before it touches the database. Then it sets, in every transaction, the verified
-- claims of the viewer's embed token:
--   ugs.environment    its ugs_environment: Customer or Testing
--   ugs.user_group_id  its ugs_user_group_id, the group's id as your backend gave it
--   ugs.variables      its ugs_variables (JSON), e.g. {"region": "emea", ...}: the group's own
--                      properties (a viewer's attributes are apart, in viewer_attributes)
--   ugs.viewer         its ugs_viewer (JSON), e.g. {"id": "ada", "attributes": {"region": "emea"}},
--                      or '' for a token that names no viewer (the whole group)
-- A group is (environment, user_group_id) within the account: the same id in Customer and in
-- Testing are two groups, and so every row of a group says which environment it is of.
-- The policies read the settings. Without them (a forgotten set_config, a pooled connection
-- reused after its transaction) current_setting(..., true) is NULL, and NULL matches no row.

create table orders (
  id            integer primary key,
  environment   text    not null check (environment in ('Customer', 'Testing')),
  user_group_id text    not null,
  region        text    not null,
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

-- The group's rows, of its environment; and, when the token names a viewer with a region
-- attribute, only that region's rows of the group. A token without a viewer, or a viewer
-- without a region, sees every row of its group (the coalesce compares the row's region with
-- itself). The viewer's region narrows what the group sees, never widens it.
create policy orders_of_the_viewer on orders
  for select
  using (
    environment = current_setting('ugs.environment', true)
    and user_group_id = current_setting('ugs.user_group_id', true)
    and region = coalesce(nullif(current_setting('ugs.viewer', true), '')::jsonb -> 'attributes' ->> 'region', region)
  );

-- The notices of the group's region: ugs_variables holds the group's properties as a token
-- with the write scope set them. A viewer's attributes never replace them (they are
-- ugs_variables.viewer_attributes), so a backend that may only mint embed tokens cannot show
-- a viewer another region's notices by naming one.
create policy notices_of_the_viewers_region on regional_notices
  for select
  using (region = (nullif(current_setting('ugs.variables', true), '')::jsonb ->> 'region'));

-- The API's role: it can log in and read, nothing else. Not the owner (owners bypass RLS
-- unless it is forced, and could disable it), not a superuser, no BYPASSRLS.
grant select on orders, regional_notices to :"app_role";
