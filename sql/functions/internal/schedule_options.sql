-- cronbox.schedule_options(): the one declaration of cronbox.schedule()'s options, a row per
-- option in the order of schedule()'s parameters (name and reason are not options). Each option
-- is a column of cronbox.job with the same name, type and default. From these rows come the
-- bound checks (cronbox.validate_schedule_args), the no-op comparison, INSERT and UPDATE of
-- cronbox.schedule_at and the columns of the view cronbox.schedule_definitions;
-- tests/test_schedule_options.py fails when a signature, the table or the view disagrees.
-- check_kind: 'one_of' (allowed), 'range' (lower_bound / upper_bound, integer or interval types;
-- lower_exclusive: the lower bound itself is refused), or 'custom' (hand-written checks in
-- cronbox.validate_schedule_args). A NULL default_value means NULL is accepted (no limit).
-- IMMUTABLE, reads nothing. How to add an option: docs/sql.md, "Adding a schedule option".
CREATE OR REPLACE FUNCTION cronbox.schedule_options()
RETURNS TABLE(option text, type text, default_value text, check_kind text, allowed text[],
              lower_bound text, lower_exclusive boolean, upper_bound text, null_hint boolean)
LANGUAGE sql IMMUTABLE
SECURITY INVOKER
-- No SET search_path (it names nothing to resolve): a SET clause would stop PostgreSQL from
-- inlining the VALUES into its callers' cached plans, and the loop of validate_schedule_args
-- would then re-plan this query on every cronbox.schedule() call (~10x its cost).
AS $$
    SELECT * FROM (VALUES
    -- option          type                        default           check     allowed                                                      lower     excl   upper       NULL says "use <default>"
    ('cron',           'text',                     NULL,             'custom', NULL::text[],                                                NULL,     false, NULL,       false),
    ('every',          'interval',                 NULL,             'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('at',             'timestamp with time zone', NULL,             'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('payload',        'jsonb',                    '{}',             'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('queue',          'text',                     'default',        'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('timezone',       'text',                     'UTC',            'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('priority',       'integer',                  '0',              'range',  NULL,                                                        '-32768', false, '32767',    false),
    ('overlap',        'text',                     'skip',           'one_of', ARRAY['skip', 'buffer_one', 'buffer_all', 'allow', 'cancel_other'], NULL, false, NULL,     false),
    ('on_error',       'text',                     'retry_schedule', 'one_of', ARRAY['retry_schedule', 'retry_soon', 'pause'],              NULL,     false, NULL,       false),
    ('max_attempts',   'integer',                  '1',              'range',  NULL,                                                        '1',      false, '1000',     false),
    ('retry_delay',    'interval',                 '10 seconds',     'range',  NULL,                                                        '0',      true,  '30 days',  false),
    ('retry_max_delay', 'interval',                '1 hour',         'range',  NULL,                                                        NULL,     false, '30 days',  false),
    ('timeout',        'interval',                 '5 minutes',      'range',  NULL,                                                        '0',      true,  '30 days',  false),
    ('catchup',        'text',                     'latest',         'one_of', ARRAY['skip', 'latest', 'all'],                              NULL,     false, NULL,       false),
    ('catchup_window', 'interval',                 '1 day',          'range',  NULL,                                                        '0',      true,  '366 days', false),
    ('jitter',         'interval',                 '0',              'range',  NULL,                                                        '0',      false, '1 day',    true),
    ('starts_at',      'timestamp with time zone', NULL,             'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('ends_at',        'timestamp with time zone', NULL,             'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('after',          'text[]',                   NULL,             'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('every_mode',     'text',                     'fixed_rate',     'one_of', ARRAY['fixed_rate', 'fixed_delay'],                          NULL,     false, NULL,       false),
    ('max_runs',       'integer',                  NULL,             'range',  NULL,                                                        '1',      false, '1000000000', false),
    ('exclude',        'text',                     NULL,             'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('needs',          'jsonb',                    NULL,             'custom', NULL,                                                        NULL,     false, NULL,       false),
    ('on_unavailable', 'text',                     'wait',           'one_of', ARRAY['wait', 'retry', 'fail'],                              NULL,     false, NULL,       false),
    ('unavailable_timeout', 'interval',            NULL,             'range',  NULL,                                                        '0',      true,  '366 days', false),
    ('notify',         'text[]',                   NULL,             'custom', NULL,                                                        NULL,     false, NULL,       false)
    ) AS o(option, type, default_value, check_kind, allowed, lower_bound, lower_exclusive, upper_bound, null_hint)
$$;

COMMENT ON FUNCTION cronbox.schedule_options() IS
'Internal: the declaration of cronbox.schedule()''s options (name, type, default, bound), one row each in parameter order; validation, the no-op comparison, INSERT/UPDATE of cronbox.job and cronbox.schedule_definitions are derived from it. See docs/sql.md, "Adding a schedule option".';

ALTER FUNCTION cronbox.schedule_options() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.schedule_options() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
