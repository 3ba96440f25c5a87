//! The SQL of each schema version, applied in order by `schema::migrate`. A released
//! migration is never edited: a change is a new one.

/// Version 1: the tables.
pub(crate) const V1_TABLES: &str = r#"
CREATE TABLE sessions (
    token_sha256 text PRIMARY KEY,
    principal    text NOT NULL,
    role         text,
    projects     text[] NOT NULL,
    attributes   jsonb NOT NULL,
    can_view     text[] NOT NULL,
    workdir      bytea,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    ended_at     timestamptz,
    machine      text NOT NULL
);
CREATE INDEX sessions_principal ON sessions (principal);

CREATE TABLE grants (
    principal  text NOT NULL,
    pack       text NOT NULL,
    capability text NOT NULL,
    granted_at timestamptz NOT NULL,
    PRIMARY KEY (principal, pack, capability)
);

CREATE TABLE pack_state (
    pack_id            text PRIMARY KEY,
    files_digest       text,
    content_changed_at timestamptz
);

CREATE TABLE approvals (
    id               text PRIMARY KEY,
    tool             text NOT NULL,
    principal        text NOT NULL,
    principal_digest text NOT NULL,
    args_digest      text NOT NULL,
    policy_hash      text NOT NULL,
    summary          jsonb NOT NULL,
    escalation       boolean NOT NULL DEFAULT false,
    requested_at     timestamptz NOT NULL,
    window_s         bigint NOT NULL,
    approved_at      timestamptz,
    denied_at        timestamptz,
    taken_at         timestamptz,
    taken_machine    text,
    machine          text NOT NULL
);
CREATE INDEX approvals_call ON approvals (tool, principal, args_digest);

CREATE TABLE counters (
    identity text NOT NULL,
    tool     text NOT NULL,
    total    bigint NOT NULL DEFAULT 0,
    recent   bigint[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (identity, tool)
);

CREATE TABLE audit_chain (
    machine    text PRIMARY KEY,
    seq        bigint NOT NULL,
    hash       text NOT NULL,
    first_seen timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_record (
    machine text NOT NULL,
    seq     bigint NOT NULL,
    prev    text NOT NULL,
    hash    text NOT NULL,
    body    text NOT NULL,
    gid     bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (machine, seq)
);
CREATE INDEX audit_record_gid ON audit_record (gid);

-- One secret per fleet, made by the first migration: the key of the audit's argument
-- digests (HMAC-SHA-256), which approvals are bound to and taken under on any machine.
CREATE TABLE fleet_secret (
    name  text PRIMARY KEY,
    value bytea NOT NULL CHECK (length(value) = 32)
);
"#;

/// Version 2: the one-statement steps `hcp_append` (a record on the machine's chain),
/// `hcp_admit` (re-check and spend, then the intent record), run as one transaction each,
/// and `hcp_snapshot` (a call's reads).
pub(crate) const V2_FUNCTIONS: &str = r#"
CREATE FUNCTION hcp_snapshot(
    p1 text, p2 text, p3 text[], p4 text[], p5 text[], p6 bigint[], p7 bigint,
    p8 timestamptz, p9 text[], p10 text[], p11 text[], p12 text[], p13 text)
RETURNS TABLE (token_sha256 text, principal text, role text, projects text[],
               attributes jsonb, can_view text[], workdir bytea, created_at timestamptz,
               expires_at timestamptz, ended_at timestamptz, granted timestamptz[],
               changed timestamptz, totals bigint[], in_window bigint[], approvals text[])
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $fn$
#variable_conflict use_column
BEGIN
    -- One statement, its plan cached by the server session (a pooler's connections
    -- keep it across calls).
    RETURN QUERY
SELECT s.token_sha256, s.principal, s.role, s.projects, s.attributes, s.can_view, s.workdir,
       s.created_at, s.expires_at, s.ended_at,
       (SELECT array_agg((SELECT max(g.granted_at) FROM grants g
                          WHERE g.principal = coalesce(s.principal, p13)
                            AND g.pack IN (p2, '*') AND g.capability = c.cap) ORDER BY c.ord)
        FROM unnest(p3::text[]) WITH ORDINALITY c(cap, ord)),
       (SELECT p.content_changed_at FROM pack_state p WHERE p.pack_id = p2),
       (SELECT array_agg(coalesce(x.total, 0) ORDER BY k.ord)
        FROM unnest(p4::text[], p5::text[], p6::bigint[])
             WITH ORDINALITY k(identity, tool, win, ord)
        LEFT JOIN counters x ON x.identity = k.identity AND x.tool = k.tool),
       (SELECT array_agg(coalesce((SELECT count(*) FROM unnest(x.recent) t
                                   WHERE t >= p7 - k.win), 0) ORDER BY k.ord)
        FROM unnest(p4::text[], p5::text[], p6::bigint[])
             WITH ORDINALITY k(identity, tool, win, ord)
        LEFT JOIN counters x ON x.identity = k.identity AND x.tool = k.tool),
       (SELECT array_agg((SELECT a.id FROM approvals a
                          WHERE a.tool = q.tool AND a.principal = coalesce(s.principal, p13)
                            AND a.principal_digest = q.pd AND a.args_digest = q.args
                            AND a.policy_hash = q.policy AND a.approved_at IS NOT NULL
                            AND a.taken_at IS NULL AND a.denied_at IS NULL
                            AND p8 < a.approved_at + make_interval(secs => a.window_s)
                          ORDER BY a.approved_at, a.id LIMIT 1) ORDER BY q.ord)
        FROM unnest(p9::text[], p10::text[], p11::text[], p12::text[])
             WITH ORDINALITY q(tool, pd, args, policy, ord))
FROM (SELECT 1) AS one
LEFT JOIN sessions s ON s.token_sha256 = p1;
END
$fn$;

CREATE FUNCTION hcp_append(p_machine text, p_body text, p_sync boolean DEFAULT true)
RETURNS TABLE (o_seq bigint, o_hash text)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
    h_seq  bigint;
    h_hash text;
    n_hash text;
BEGIN
    -- An outcome does not wait for its own WAL flush (the next durable commit carries
    -- it; a power loss before that shows the call as interrupted, never as damage).
    IF NOT p_sync THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    INSERT INTO audit_chain (machine, seq, hash)
    VALUES (p_machine, 0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000')
    ON CONFLICT (machine) DO NOTHING;
    SELECT c.seq, c.hash INTO h_seq, h_hash FROM audit_chain c
    WHERE c.machine = p_machine FOR UPDATE;
    n_hash := 'sha256:' || encode(sha256(convert_to(
        h_hash || E'\n' || (h_seq + 1)::text || E'\n' || p_body, 'UTF8')), 'hex');
    INSERT INTO audit_record (machine, seq, prev, hash, body)
    VALUES (p_machine, h_seq + 1, h_hash, n_hash, p_body);
    UPDATE audit_chain SET seq = h_seq + 1, hash = n_hash WHERE machine = p_machine;
    PERFORM pg_notify('hcp_audit_' || current_schema(), p_machine);
    o_seq := h_seq + 1;
    o_hash := n_hash;
    RETURN NEXT;
END
$fn$;

CREATE FUNCTION hcp_admit(
    p_machine text, p_body text, p_now timestamptz,
    p_session text, p_principal text, p_pack text, p_capabilities text[],
    p_c_identity text[], p_c_tool text[], p_c_rate bigint[], p_c_budget bigint[],
    p_c_window bigint[], p_now_ms bigint,
    p_a_tool text[], p_a_principal_digest text[], p_a_args text[], p_a_policy text[])
RETURNS TABLE (o_status text, o_detail text, o_at timestamptz,
               o_seq bigint, o_hash text, o_approvals text[])
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
    s       record;
    g       record;
    g_max   timestamptz;
    g_maxes timestamptz[] := '{}';
    cap     text;
    changed timestamptz;
    c       record;
    n       bigint;
    apr     text;
    aprs    text[] := '{}';
    i       int;
    k       int := coalesce(array_length(p_c_identity, 1), 0);
    na      int := coalesce(array_length(p_a_tool, 1), 0);
BEGIN
    -- 1. the session: present, not ended, not expired (an end waits for this lock)
    IF p_session IS NOT NULL THEN
        SELECT x.principal, x.ended_at, x.expires_at INTO s FROM sessions x
        WHERE x.token_sha256 = p_session FOR SHARE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'bad_session', 'unknown', NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF s.ended_at IS NOT NULL THEN
            RETURN QUERY SELECT 'bad_session', 'ended', s.ended_at,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF p_now >= s.expires_at THEN
            RETURN QUERY SELECT 'bad_session', 'expired', s.expires_at,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF s.principal <> p_principal THEN
            RETURN QUERY SELECT 'bad_session', 'principal', NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
    END IF;
    -- 2. the grants (every capability the gate checked), then the rug-pull guard: the
    --    rows are locked first, so a revoke or a content change waits for this admit
    IF p_capabilities IS NOT NULL THEN
        FOREACH cap IN ARRAY p_capabilities LOOP
            g_max := NULL;
            FOR g IN SELECT x.granted_at FROM grants x
                     WHERE x.principal = p_principal AND x.pack IN (p_pack, '*')
                       AND x.capability = cap
                     FOR SHARE LOOP
                IF g_max IS NULL OR g.granted_at > g_max THEN
                    g_max := g.granted_at;
                END IF;
            END LOOP;
            g_maxes := array_append(g_maxes, g_max);
        END LOOP;
        SELECT x.content_changed_at INTO changed FROM pack_state x WHERE x.pack_id = p_pack;
        FOR i IN 1 .. coalesce(array_length(p_capabilities, 1), 0) LOOP
            IF g_maxes[i] IS NULL THEN
                RETURN QUERY SELECT 'missing_grant', p_capabilities[i], NULL::timestamptz,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
            IF changed IS NOT NULL AND g_maxes[i] < changed THEN
                RETURN QUERY SELECT 'suspended', p_capabilities[i], changed,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
        END LOOP;
    END IF;
    -- 3. the counters, in the caller's (sorted) order: locked, then checked
    FOR i IN 1 .. k LOOP
        INSERT INTO counters (identity, tool) VALUES (p_c_identity[i], p_c_tool[i])
        ON CONFLICT (identity, tool) DO NOTHING;
        SELECT x.total, x.recent INTO c FROM counters x
        WHERE x.identity = p_c_identity[i] AND x.tool = p_c_tool[i] FOR UPDATE;
        IF p_c_budget[i] IS NOT NULL AND c.total >= p_c_budget[i] THEN
            RETURN QUERY SELECT 'budget', p_c_tool[i], NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF p_c_rate[i] IS NOT NULL THEN
            SELECT count(*) INTO n FROM unnest(c.recent) t WHERE t >= p_now_ms - p_c_window[i];
            IF n >= least(p_c_rate[i], 100000) THEN
                RETURN QUERY SELECT 'rate_limit', p_c_tool[i], NULL::timestamptz,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
        END IF;
    END LOOP;
    -- 4. each approval: approved, not taken, not denied, within its window
    FOR i IN 1 .. na LOOP
        apr := NULL;
        SELECT x.id INTO apr FROM approvals x
        WHERE x.tool = p_a_tool[i] AND x.principal = p_principal
          AND x.principal_digest = p_a_principal_digest[i] AND x.args_digest = p_a_args[i]
          AND x.policy_hash = p_a_policy[i] AND x.approved_at IS NOT NULL
          AND x.taken_at IS NULL AND x.denied_at IS NULL
          AND p_now < x.approved_at + make_interval(secs => x.window_s)
          AND NOT (x.id = ANY (aprs))
        ORDER BY x.approved_at, x.id LIMIT 1 FOR UPDATE;
        IF apr IS NULL THEN
            RETURN QUERY SELECT 'approval_gone', p_a_tool[i], NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        aprs := aprs || apr;
    END LOOP;
    -- 5. every check passed: spend, then the intent record
    FOR i IN 1 .. k LOOP
        UPDATE counters x SET
            total = x.total + 1,
            recent = CASE WHEN p_c_rate[i] IS NULL THEN '{}'::bigint[] ELSE
                array(SELECT t FROM unnest(x.recent) t
                      WHERE t >= p_now_ms - p_c_window[i] ORDER BY t DESC LIMIT 99999)
                || p_now_ms END
        WHERE x.identity = p_c_identity[i] AND x.tool = p_c_tool[i];
    END LOOP;
    IF na > 0 THEN
        UPDATE approvals SET taken_at = p_now, taken_machine = p_machine WHERE id = ANY (aprs);
    END IF;
    RETURN QUERY SELECT 'admitted', NULL::text, NULL::timestamptz, a.o_seq, a.o_hash, aprs
        FROM hcp_append(p_machine, p_body) a;
END
$fn$;
"#;

/// Version 3: an approval is of one kind (`escalation`: it answers the tool's `escalate`,
/// else its `confirmation`; two separate approvals of one call), so the snapshot's lookup
/// and admit's take match the kind too (`p14`, `p_a_escalation`). The columns
/// (`escalation`, `denied_at`) are version 1's; the functions of version 2 are replaced.
pub(crate) const V3_APPROVAL_KINDS: &str = r#"
DROP FUNCTION IF EXISTS hcp_snapshot(text, text, text[], text[], text[], bigint[], bigint,
    timestamptz, text[], text[], text[], text[], text);
DROP FUNCTION IF EXISTS hcp_admit(text, text, timestamptz, text, text, text, text[], text[], text[],
    bigint[], bigint[], bigint[], bigint, text[], text[], text[], text[]);
CREATE FUNCTION hcp_snapshot(
    p1 text, p2 text, p3 text[], p4 text[], p5 text[], p6 bigint[], p7 bigint,
    p8 timestamptz, p9 text[], p10 text[], p11 text[], p12 text[], p13 text, p14 boolean[])
RETURNS TABLE (token_sha256 text, principal text, role text, projects text[],
               attributes jsonb, can_view text[], workdir bytea, created_at timestamptz,
               expires_at timestamptz, ended_at timestamptz, granted timestamptz[],
               changed timestamptz, totals bigint[], in_window bigint[], approvals text[])
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $fn$
#variable_conflict use_column
BEGIN
    -- One statement, its plan cached by the server session (a pooler's connections
    -- keep it across calls).
    RETURN QUERY
SELECT s.token_sha256, s.principal, s.role, s.projects, s.attributes, s.can_view, s.workdir,
       s.created_at, s.expires_at, s.ended_at,
       (SELECT array_agg((SELECT max(g.granted_at) FROM grants g
                          WHERE g.principal = coalesce(s.principal, p13)
                            AND g.pack IN (p2, '*') AND g.capability = c.cap) ORDER BY c.ord)
        FROM unnest(p3::text[]) WITH ORDINALITY c(cap, ord)),
       (SELECT p.content_changed_at FROM pack_state p WHERE p.pack_id = p2),
       (SELECT array_agg(coalesce(x.total, 0) ORDER BY k.ord)
        FROM unnest(p4::text[], p5::text[], p6::bigint[])
             WITH ORDINALITY k(identity, tool, win, ord)
        LEFT JOIN counters x ON x.identity = k.identity AND x.tool = k.tool),
       (SELECT array_agg(coalesce((SELECT count(*) FROM unnest(x.recent) t
                                   WHERE t >= p7 - k.win), 0) ORDER BY k.ord)
        FROM unnest(p4::text[], p5::text[], p6::bigint[])
             WITH ORDINALITY k(identity, tool, win, ord)
        LEFT JOIN counters x ON x.identity = k.identity AND x.tool = k.tool),
       (SELECT array_agg((SELECT a.id FROM approvals a
                          WHERE a.tool = q.tool AND a.principal = coalesce(s.principal, p13)
                            AND a.principal_digest = q.pd AND a.args_digest = q.args
                            AND a.policy_hash = q.policy AND a.escalation = q.esc
                            AND a.approved_at IS NOT NULL
                            AND a.taken_at IS NULL AND a.denied_at IS NULL
                            AND p8 < a.approved_at + make_interval(secs => a.window_s)
                          ORDER BY a.approved_at, a.id LIMIT 1) ORDER BY q.ord)
        FROM unnest(p9::text[], p10::text[], p11::text[], p12::text[], p14::boolean[])
             WITH ORDINALITY q(tool, pd, args, policy, esc, ord))
FROM (SELECT 1) AS one
LEFT JOIN sessions s ON s.token_sha256 = p1;
END
$fn$;

CREATE FUNCTION hcp_admit(
    p_machine text, p_body text, p_now timestamptz,
    p_session text, p_principal text, p_pack text, p_capabilities text[],
    p_c_identity text[], p_c_tool text[], p_c_rate bigint[], p_c_budget bigint[],
    p_c_window bigint[], p_now_ms bigint,
    p_a_tool text[], p_a_principal_digest text[], p_a_args text[], p_a_policy text[],
    p_a_escalation boolean[])
RETURNS TABLE (o_status text, o_detail text, o_at timestamptz,
               o_seq bigint, o_hash text, o_approvals text[])
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
    s       record;
    g       record;
    g_max   timestamptz;
    g_maxes timestamptz[] := '{}';
    cap     text;
    changed timestamptz;
    c       record;
    n       bigint;
    apr     text;
    aprs    text[] := '{}';
    i       int;
    k       int := coalesce(array_length(p_c_identity, 1), 0);
    na      int := coalesce(array_length(p_a_tool, 1), 0);
BEGIN
    -- 1. the session: present, not ended, not expired (an end waits for this lock)
    IF p_session IS NOT NULL THEN
        SELECT x.principal, x.ended_at, x.expires_at INTO s FROM sessions x
        WHERE x.token_sha256 = p_session FOR SHARE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'bad_session', 'unknown', NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF s.ended_at IS NOT NULL THEN
            RETURN QUERY SELECT 'bad_session', 'ended', s.ended_at,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF p_now >= s.expires_at THEN
            RETURN QUERY SELECT 'bad_session', 'expired', s.expires_at,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF s.principal <> p_principal THEN
            RETURN QUERY SELECT 'bad_session', 'principal', NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
    END IF;
    -- 2. the grants (every capability the gate checked), then the rug-pull guard: the
    --    rows are locked first, so a revoke or a content change waits for this admit
    IF p_capabilities IS NOT NULL THEN
        FOREACH cap IN ARRAY p_capabilities LOOP
            g_max := NULL;
            FOR g IN SELECT x.granted_at FROM grants x
                     WHERE x.principal = p_principal AND x.pack IN (p_pack, '*')
                       AND x.capability = cap
                     FOR SHARE LOOP
                IF g_max IS NULL OR g.granted_at > g_max THEN
                    g_max := g.granted_at;
                END IF;
            END LOOP;
            g_maxes := array_append(g_maxes, g_max);
        END LOOP;
        SELECT x.content_changed_at INTO changed FROM pack_state x WHERE x.pack_id = p_pack;
        FOR i IN 1 .. coalesce(array_length(p_capabilities, 1), 0) LOOP
            IF g_maxes[i] IS NULL THEN
                RETURN QUERY SELECT 'missing_grant', p_capabilities[i], NULL::timestamptz,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
            IF changed IS NOT NULL AND g_maxes[i] < changed THEN
                RETURN QUERY SELECT 'suspended', p_capabilities[i], changed,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
        END LOOP;
    END IF;
    -- 3. the counters, in the caller's (sorted) order: locked, then checked
    FOR i IN 1 .. k LOOP
        INSERT INTO counters (identity, tool) VALUES (p_c_identity[i], p_c_tool[i])
        ON CONFLICT (identity, tool) DO NOTHING;
        SELECT x.total, x.recent INTO c FROM counters x
        WHERE x.identity = p_c_identity[i] AND x.tool = p_c_tool[i] FOR UPDATE;
        IF p_c_budget[i] IS NOT NULL AND c.total >= p_c_budget[i] THEN
            RETURN QUERY SELECT 'budget', p_c_tool[i], NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF p_c_rate[i] IS NOT NULL THEN
            SELECT count(*) INTO n FROM unnest(c.recent) t WHERE t >= p_now_ms - p_c_window[i];
            IF n >= least(p_c_rate[i], 100000) THEN
                RETURN QUERY SELECT 'rate_limit', p_c_tool[i], NULL::timestamptz,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
        END IF;
    END LOOP;
    -- 4. each approval of its kind (escalation or confirmation): approved, not taken,
    --    not denied, within its window
    FOR i IN 1 .. na LOOP
        apr := NULL;
        SELECT x.id INTO apr FROM approvals x
        WHERE x.tool = p_a_tool[i] AND x.principal = p_principal
          AND x.principal_digest = p_a_principal_digest[i] AND x.args_digest = p_a_args[i]
          AND x.policy_hash = p_a_policy[i] AND x.escalation = p_a_escalation[i]
          AND x.approved_at IS NOT NULL
          AND x.taken_at IS NULL AND x.denied_at IS NULL
          AND p_now < x.approved_at + make_interval(secs => x.window_s)
          AND NOT (x.id = ANY (aprs))
        ORDER BY x.approved_at, x.id LIMIT 1 FOR UPDATE;
        IF apr IS NULL THEN
            RETURN QUERY SELECT 'approval_gone', p_a_tool[i], NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        aprs := aprs || apr;
    END LOOP;
    -- 5. every check passed: spend, then the intent record
    FOR i IN 1 .. k LOOP
        UPDATE counters x SET
            total = x.total + 1,
            recent = CASE WHEN p_c_rate[i] IS NULL THEN '{}'::bigint[] ELSE
                array(SELECT t FROM unnest(x.recent) t
                      WHERE t >= p_now_ms - p_c_window[i] ORDER BY t DESC LIMIT 99999)
                || p_now_ms END
        WHERE x.identity = p_c_identity[i] AND x.tool = p_c_tool[i];
    END LOOP;
    IF na > 0 THEN
        UPDATE approvals SET taken_at = p_now, taken_machine = p_machine WHERE id = ANY (aprs);
    END IF;
    RETURN QUERY SELECT 'admitted', NULL::text, NULL::timestamptz, a.o_seq, a.o_hash, aprs
        FROM hcp_append(p_machine, p_body) a;
END
$fn$;
"#;

/// Version 4: `hcp_append` (same signature) locks the machine's head row first and makes
/// it only when it is missing: one statement fewer per record. (The reads of a call are
/// one plain statement, `reads.rs`: a function's plan cache would save a pooled server
/// session a tenth of a millisecond and cost a new one a millisecond.)
pub(crate) const V4_APPEND: &str = r#"
CREATE OR REPLACE FUNCTION hcp_append(p_machine text, p_body text, p_sync boolean DEFAULT true)
RETURNS TABLE (o_seq bigint, o_hash text)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
    h_seq  bigint;
    h_hash text;
    n_hash text;
BEGIN
    -- An outcome does not wait for its own WAL flush (the next durable commit carries
    -- it; a power loss before that shows the call as interrupted, never as damage).
    IF NOT p_sync THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    SELECT c.seq, c.hash INTO h_seq, h_hash FROM audit_chain c
    WHERE c.machine = p_machine FOR UPDATE;
    IF NOT FOUND THEN
        -- The machine's first record: its head row, then the lock on it.
        INSERT INTO audit_chain (machine, seq, hash)
        VALUES (p_machine, 0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000')
        ON CONFLICT (machine) DO NOTHING;
        SELECT c.seq, c.hash INTO h_seq, h_hash FROM audit_chain c
        WHERE c.machine = p_machine FOR UPDATE;
    END IF;
    n_hash := 'sha256:' || encode(sha256(convert_to(
        h_hash || E'\n' || (h_seq + 1)::text || E'\n' || p_body, 'UTF8')), 'hex');
    INSERT INTO audit_record (machine, seq, prev, hash, body)
    VALUES (p_machine, h_seq + 1, h_hash, n_hash, p_body);
    UPDATE audit_chain SET seq = h_seq + 1, hash = n_hash WHERE machine = p_machine;
    PERFORM pg_notify('hcp_audit_' || current_schema(), p_machine);
    o_seq := h_seq + 1;
    o_hash := n_hash;
    RETURN NEXT;
END
$fn$;
"#;

/// Version 5: keyed chains and the witness (RUNTIME §6). A record's hash is computed by
/// its machine (HMAC-SHA-256 under the machine's chain key, which never reaches the
/// database): `hcp_append_keyed` and `hcp_admit_keyed` take the hash and the head the machine
/// computed it on, and append only when that is still the chain's head (under the head
/// row's lock); else they answer `stale` with the head, and the machine computes again.
/// `hcp_admit_keyed` is `hcp_admit` that locks the head row first, so a stale head spends
/// nothing. (`hcp_append` and `hcp_admit` stay, for a state without a machine's store:
/// the server's plain chain of schema 4.) Applying it again changes nothing. `audit_witness`
/// keeps the machines' signed checkpoints; their role may only insert into it.
pub(crate) const V5_KEYED: &str = r#"
CREATE TABLE IF NOT EXISTS audit_witness (
    gid        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    machine    text NOT NULL,
    store      text NOT NULL,
    count      bigint NOT NULL,
    head       text NOT NULL,
    key        text NOT NULL,
    checkpoint text NOT NULL,
    taken_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS audit_witness_machine ON audit_witness (machine, count);

CREATE OR REPLACE FUNCTION hcp_head(p_machine text) RETURNS TABLE (h_seq bigint, h_hash text)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
BEGIN
    RETURN QUERY SELECT c.seq, c.hash FROM audit_chain c
        WHERE c.machine = p_machine FOR UPDATE;
    IF NOT FOUND THEN
        -- The machine's first record: its head row, then the lock on it.
        INSERT INTO audit_chain (machine, seq, hash)
        VALUES (p_machine, 0, 'sha256:0000000000000000000000000000000000000000000000000000000000000000')
        ON CONFLICT (machine) DO NOTHING;
        RETURN QUERY SELECT c.seq, c.hash FROM audit_chain c
            WHERE c.machine = p_machine FOR UPDATE;
    END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION hcp_append_keyed(p_machine text, p_body text, p_sync boolean,
    p_prev_seq bigint, p_prev_hash text, p_hash text)
RETURNS TABLE (o_status text, o_seq bigint, o_hash text)
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
    h record;
BEGIN
    IF NOT p_sync THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    SELECT * INTO h FROM hcp_head(p_machine);
    IF p_prev_seq IS DISTINCT FROM h.h_seq OR p_prev_hash IS DISTINCT FROM h.h_hash THEN
        RETURN QUERY SELECT 'stale'::text, h.h_seq, h.h_hash;
        RETURN;
    END IF;
    INSERT INTO audit_record (machine, seq, prev, hash, body)
    VALUES (p_machine, h.h_seq + 1, h.h_hash, p_hash, p_body);
    UPDATE audit_chain SET seq = h.h_seq + 1, hash = p_hash WHERE machine = p_machine;
    PERFORM pg_notify('hcp_audit_' || current_schema(), p_machine);
    RETURN QUERY SELECT 'appended'::text, h.h_seq + 1, p_hash;
END
$fn$;

CREATE OR REPLACE FUNCTION hcp_admit_keyed(
    p_machine text, p_body text, p_now timestamptz,
    p_session text, p_principal text, p_pack text, p_capabilities text[],
    p_c_identity text[], p_c_tool text[], p_c_rate bigint[], p_c_budget bigint[],
    p_c_window bigint[], p_now_ms bigint,
    p_a_tool text[], p_a_principal_digest text[], p_a_args text[], p_a_policy text[],
    p_a_escalation boolean[], p_prev_seq bigint, p_prev_hash text, p_hash text)
RETURNS TABLE (o_status text, o_detail text, o_at timestamptz,
               o_seq bigint, o_hash text, o_approvals text[])
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $fn$
DECLARE
    h       record;
    s       record;
    g       record;
    g_max   timestamptz;
    g_maxes timestamptz[] := '{}';
    cap     text;
    changed timestamptz;
    c       record;
    n       bigint;
    apr     text;
    aprs    text[] := '{}';
    i       int;
    k       int := coalesce(array_length(p_c_identity, 1), 0);
    na      int := coalesce(array_length(p_a_tool, 1), 0);
BEGIN
    -- 0. the chain's head first: a hash computed on another head spends nothing
    SELECT * INTO h FROM hcp_head(p_machine);
    IF p_prev_seq IS DISTINCT FROM h.h_seq OR p_prev_hash IS DISTINCT FROM h.h_hash THEN
        RETURN QUERY SELECT 'stale', NULL::text, NULL::timestamptz, h.h_seq, h.h_hash,
            NULL::text[];
        RETURN;
    END IF;
    -- 1. the session: present, not ended, not expired (an end waits for this lock)
    IF p_session IS NOT NULL THEN
        SELECT x.principal, x.ended_at, x.expires_at INTO s FROM sessions x
        WHERE x.token_sha256 = p_session FOR SHARE;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 'bad_session', 'unknown', NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF s.ended_at IS NOT NULL THEN
            RETURN QUERY SELECT 'bad_session', 'ended', s.ended_at,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF p_now >= s.expires_at THEN
            RETURN QUERY SELECT 'bad_session', 'expired', s.expires_at,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF s.principal <> p_principal THEN
            RETURN QUERY SELECT 'bad_session', 'principal', NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
    END IF;
    -- 2. the grants, then the rug-pull guard
    IF p_capabilities IS NOT NULL THEN
        FOREACH cap IN ARRAY p_capabilities LOOP
            g_max := NULL;
            FOR g IN SELECT x.granted_at FROM grants x
                     WHERE x.principal = p_principal AND x.pack IN (p_pack, '*')
                       AND x.capability = cap
                     FOR SHARE LOOP
                IF g_max IS NULL OR g.granted_at > g_max THEN
                    g_max := g.granted_at;
                END IF;
            END LOOP;
            g_maxes := array_append(g_maxes, g_max);
        END LOOP;
        SELECT x.content_changed_at INTO changed FROM pack_state x WHERE x.pack_id = p_pack;
        FOR i IN 1 .. coalesce(array_length(p_capabilities, 1), 0) LOOP
            IF g_maxes[i] IS NULL THEN
                RETURN QUERY SELECT 'missing_grant', p_capabilities[i], NULL::timestamptz,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
            IF changed IS NOT NULL AND g_maxes[i] < changed THEN
                RETURN QUERY SELECT 'suspended', p_capabilities[i], changed,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
        END LOOP;
    END IF;
    -- 3. the counters, in the caller's (sorted) order: locked, then checked
    FOR i IN 1 .. k LOOP
        INSERT INTO counters (identity, tool) VALUES (p_c_identity[i], p_c_tool[i])
        ON CONFLICT (identity, tool) DO NOTHING;
        SELECT x.total, x.recent INTO c FROM counters x
        WHERE x.identity = p_c_identity[i] AND x.tool = p_c_tool[i] FOR UPDATE;
        IF p_c_budget[i] IS NOT NULL AND c.total >= p_c_budget[i] THEN
            RETURN QUERY SELECT 'budget', p_c_tool[i], NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        IF p_c_rate[i] IS NOT NULL THEN
            SELECT count(*) INTO n FROM unnest(c.recent) t WHERE t >= p_now_ms - p_c_window[i];
            IF n >= least(p_c_rate[i], 100000) THEN
                RETURN QUERY SELECT 'rate_limit', p_c_tool[i], NULL::timestamptz,
                    NULL::bigint, NULL::text, NULL::text[];
                RETURN;
            END IF;
        END IF;
    END LOOP;
    -- 4. each approval of its kind
    FOR i IN 1 .. na LOOP
        apr := NULL;
        SELECT x.id INTO apr FROM approvals x
        WHERE x.tool = p_a_tool[i] AND x.principal = p_principal
          AND x.principal_digest = p_a_principal_digest[i] AND x.args_digest = p_a_args[i]
          AND x.policy_hash = p_a_policy[i] AND x.escalation = p_a_escalation[i]
          AND x.approved_at IS NOT NULL
          AND x.taken_at IS NULL AND x.denied_at IS NULL
          AND p_now < x.approved_at + make_interval(secs => x.window_s)
          AND NOT (x.id = ANY (aprs))
        ORDER BY x.approved_at, x.id LIMIT 1 FOR UPDATE;
        IF apr IS NULL THEN
            RETURN QUERY SELECT 'approval_gone', p_a_tool[i], NULL::timestamptz,
                NULL::bigint, NULL::text, NULL::text[];
            RETURN;
        END IF;
        aprs := aprs || apr;
    END LOOP;
    -- 5. every check passed: spend, then the intent record with the machine's hash
    FOR i IN 1 .. k LOOP
        UPDATE counters x SET
            total = x.total + 1,
            recent = CASE WHEN p_c_rate[i] IS NULL THEN '{}'::bigint[] ELSE
                array(SELECT t FROM unnest(x.recent) t
                      WHERE t >= p_now_ms - p_c_window[i] ORDER BY t DESC LIMIT 99999)
                || p_now_ms END
        WHERE x.identity = p_c_identity[i] AND x.tool = p_c_tool[i];
    END LOOP;
    IF na > 0 THEN
        UPDATE approvals SET taken_at = p_now, taken_machine = p_machine WHERE id = ANY (aprs);
    END IF;
    INSERT INTO audit_record (machine, seq, prev, hash, body)
    VALUES (p_machine, h.h_seq + 1, h.h_hash, p_hash, p_body);
    UPDATE audit_chain SET seq = h.h_seq + 1, hash = p_hash WHERE machine = p_machine;
    PERFORM pg_notify('hcp_audit_' || current_schema(), p_machine);
    RETURN QUERY SELECT 'admitted', NULL::text, NULL::timestamptz, h.h_seq + 1, p_hash, aprs;
END
$fn$;
"#;

/// Version 6: an approval names the session and the project of the call it pauses, for
/// `hcp approvals` (RUNTIME §7). What binds it to them is its `principal_digest`, which
/// covers both; these columns only show them.
pub(crate) const V6_APPROVAL_TENANT: &str = "
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS session text;
ALTER TABLE approvals ADD COLUMN IF NOT EXISTS project text;
";
