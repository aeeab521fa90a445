-- The lock table and its functions, made or migrated in place by one DO
-- block under an advisory lock (pg_backend.cpp runs it at connect). The
-- placeholders, filled in by schema.cpp's with_table: an at-sign and T is
-- the schema-qualified table name, an at-sign and C the release channel.
-- A new version changes kSchemaVersion (schema.hpp) and the version this
-- block checks first and records last.
DO $do$
DECLARE v bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('dlock schema @T'));
  PERFORM set_config('synchronous_commit', 'on', true);  -- a table lost in a crash loses its locks
  IF to_regclass('@T_meta') IS NOT NULL THEN
    SELECT value INTO v FROM @T_meta WHERE key = 'schema';
    IF v >= 7 THEN RETURN; END IF;  -- current (or newer: refused by the version check)
  END IF;
  CREATE SEQUENCE IF NOT EXISTS @T_fence NO CYCLE;
  CREATE TABLE IF NOT EXISTS @T (
    name text PRIMARY KEY,
    owner text NOT NULL,
    grant_id bigint NOT NULL,
    depth int NOT NULL,
    fence bigint NOT NULL,
    expires_at timestamptz NOT NULL);
  -- Grants whose acquire may still arrive after the client gave up on it
  -- (its reply was lost): such a stray copy must not take the lock.
  CREATE TABLE IF NOT EXISTS @T_tombstones (
    name text NOT NULL,
    grant_id bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, grant_id));
  -- Version 3: lines (core/lock_line.hpp). The exclusive holder of a line
  -- lives in the lock row like any other (so plain acquirers exclude it),
  -- with what it said of itself in `info` (NULL for a plain grant); shared
  -- holders and waiters beside it, keyed by name + owner + grant. While a
  -- name has any, its row exists (free: owner '', expires_at -infinity) and
  -- says so (`line`): a plain call reads that in the row it locks anyway,
  -- and pays nothing for lines elsewhere.
  ALTER TABLE @T ADD COLUMN IF NOT EXISTS info text;
  ALTER TABLE @T ADD COLUMN IF NOT EXISTS line bool NOT NULL DEFAULT false;
  CREATE SEQUENCE IF NOT EXISTS @T_ticket NO CYCLE;
  CREATE TABLE IF NOT EXISTS @T_line (
    name text NOT NULL,
    owner text NOT NULL,
    grant_id bigint NOT NULL,
    shared bool NOT NULL,      -- the mode asked for
    holder bool NOT NULL,      -- true: a shared holder; false: a waiter
    ticket bigint NOT NULL,    -- a waiter's arrival order
    permits int NOT NULL,      -- shared: the name's permits (0: no limit)
    depth int NOT NULL,
    fence bigint NOT NULL,
    lease_ms bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    info text NOT NULL,
    PRIMARY KEY (name, owner, grant_id));
  CREATE TABLE IF NOT EXISTS @T_line_tombs (
    name text NOT NULL,
    owner text NOT NULL,
    grant_id bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, owner, grant_id));

  -- Version 5: every grant says who holds it (p_info, a plain grant's too)
  -- and when it was granted (server time), for inspect.
  ALTER TABLE @T ADD COLUMN IF NOT EXISTS granted_at timestamptz;
  ALTER TABLE @T_line ADD COLUMN IF NOT EXISTS granted_at timestamptz;
  DROP FUNCTION IF EXISTS @T_acquire(text, text, bigint, int, bigint);

  -- Version 6: a plain lock's waiters, woken one at a time. A caller that
  -- will wait joins @T_waiters when busy (its member "<client id>:<attempt>",
  -- in arrival order); a release wakes the first with a NOTIFY on its
  -- client's own channel, dlockw_<client id>, and keeps the free row for it
  -- for 500 ms (woken, woken_until): nobody else takes it meanwhile. The
  -- next waiter is told to stand by and takes it if the woken one never
  -- comes. The row's `waiters` says some may wait: a release without it
  -- does nothing more than before. A waiter whose client is gone is dropped
  -- when its row expires (a minute after the wait it was told).
  ALTER TABLE @T ADD COLUMN IF NOT EXISTS waiters bool NOT NULL DEFAULT false;
  ALTER TABLE @T ADD COLUMN IF NOT EXISTS woken text;
  ALTER TABLE @T ADD COLUMN IF NOT EXISTS woken_until timestamptz;
  CREATE TABLE IF NOT EXISTS @T_waiters (
    name text NOT NULL,
    member text NOT NULL,
    ticket bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (name, ticket),
    UNIQUE (name, member));
  DROP FUNCTION IF EXISTS @T_acquire(text, text, bigint, int, bigint, text);
  DROP FUNCTION IF EXISTS @T_join(text, text, bigint);

  -- Version 7: a line's waiter names its client, so that its hand-over is
  -- told on that client's channel (dlockw_<client id>) alone, and observers
  -- hear "\x1fc<name>" on the table's: a line's waiters no longer LISTEN to
  -- every hand-over of the table. NULL (none given): the table's channel.
  ALTER TABLE @T_line ADD COLUMN IF NOT EXISTS client text;
  DROP FUNCTION IF EXISTS @T_line_acquire(text, text, bigint, int, bigint, bool, int, bool, text);

  -- p_front: a caller that waited already and is not queued was taken out
  -- by a release (woken too late for its reservation): back to the front,
  -- so a missed turn costs it one grant, not a round of the queue.
  CREATE OR REPLACE FUNCTION @T_join(p_name text, p_member text, p_ttl bigint, p_front bool)
  RETURNS void LANGUAGE plpgsql AS $f$
  DECLARE
    v_until timestamptz := clock_timestamp() + (greatest(p_ttl, 0) + 60000) * interval '1 millisecond';
  BEGIN
    IF p_member IS NULL OR p_member = '' THEN RETURN; END IF;
    UPDATE @T_waiters x SET expires_at = greatest(x.expires_at, v_until)
      WHERE x.name = p_name AND x.member = p_member;
    IF NOT FOUND THEN
      INSERT INTO @T_waiters VALUES (p_name, p_member,
          CASE WHEN p_front THEN coalesce((SELECT min(y.ticket) FROM @T_waiters y WHERE y.name = p_name), 1) - 1
               ELSE nextval('@T_ticket') END, v_until)
        ON CONFLICT DO NOTHING;
    END IF;
    UPDATE @T l SET waiters = true WHERE l.name = p_name AND NOT l.waiters;
  END $f$;

  -- Wakes the first live waiter and keeps the row, free, for it; false if
  -- none waits. The caller holds the name's row lock (or no row exists).
  CREATE OR REPLACE FUNCTION @T_wake_next(p_name text)
  RETURNS bool LANGUAGE plpgsql AS $f$
  DECLARE
    w @T_waiters%ROWTYPE;
    nx @T_waiters%ROWTYPE;
    now_ts timestamptz := clock_timestamp();
  BEGIN
    FOR i IN 1..16 LOOP
      DELETE FROM @T_waiters x WHERE x.name = p_name AND x.ticket =
          (SELECT y.ticket FROM @T_waiters y WHERE y.name = p_name ORDER BY y.ticket LIMIT 1)
        RETURNING * INTO w;
      IF NOT FOUND THEN RETURN false; END IF;
      CONTINUE WHEN w.expires_at <= now_ts;
      INSERT INTO @T AS l (name, owner, grant_id, depth, fence, expires_at, info, line, waiters, woken, woken_until)
        VALUES (p_name, '', 0, 0, 0, '-infinity', NULL, false, true, w.member, now_ts + interval '500 milliseconds')
        ON CONFLICT (name) DO UPDATE SET owner = '', grant_id = 0, depth = 0, expires_at = '-infinity', info = NULL,
          waiters = true, woken = EXCLUDED.woken, woken_until = EXCLUDED.woken_until;
      PERFORM pg_notify('dlockw_' || split_part(w.member, ':', 1),
                        chr(31) || 'w' || split_part(w.member, ':', 2) || ':' || p_name);
      SELECT * INTO nx FROM @T_waiters y WHERE y.name = p_name ORDER BY y.ticket LIMIT 1;
      IF FOUND THEN
        PERFORM pg_notify('dlockw_' || split_part(nx.member, ':', 1),
                          chr(31) || 's' || split_part(nx.member, ':', 2) || ':500:' || p_name);
      END IF;
      RETURN true;
    END LOOP;
    RETURN false;
  END $f$;

  -- A line that emptied: a plain waiter behind it is woken (nobody holds).
  CREATE OR REPLACE FUNCTION @T_wake_if_free(p_name text)
  RETURNS void LANGUAGE plpgsql AS $f$
  BEGIN
    IF NOT EXISTS (SELECT 1 FROM @T_line x WHERE x.name = p_name)
       AND NOT EXISTS (SELECT 1 FROM @T l WHERE l.name = p_name AND l.expires_at > clock_timestamp())
       AND EXISTS (SELECT 1 FROM @T_waiters x WHERE x.name = p_name) THEN
      PERFORM @T_wake_next(p_name);
    END IF;
  END $f$;

  -- A waiter leaves (its call ended, or it was woken after it ended): if
  -- the row was kept for it, the next one is woken now.
  CREATE OR REPLACE FUNCTION @T_leave(p_name text, p_member text)
  RETURNS void LANGUAGE plpgsql AS $f$
  DECLARE
    r @T%ROWTYPE;
  BEGIN
    SELECT * INTO r FROM @T l WHERE l.name = p_name FOR UPDATE;  -- the row lock first, as every call
    DELETE FROM @T_waiters x WHERE x.name = p_name AND x.member = p_member;
    IF r.name IS NULL OR r.woken IS DISTINCT FROM p_member THEN RETURN; END IF;
    UPDATE @T l SET woken = NULL, woken_until = NULL WHERE l.name = p_name;
    IF r.expires_at <= clock_timestamp() AND NOT r.line AND NOT @T_wake_next(p_name) THEN
      DELETE FROM @T l WHERE l.name = p_name;
    END IF;
  END $f$;

  -- p_member: the caller's place among the waiters if it will wait ('':
  -- none); p_waited: an earlier attempt of its call was busy (a grant
  -- leaves the waiters).
  CREATE OR REPLACE FUNCTION @T_acquire(p_name text, p_owner text, p_grant bigint, p_held int, p_lease bigint,
                                        p_info text, p_member text DEFAULT '', p_waited bool DEFAULT false)
  RETURNS TABLE (kind int, fence bigint, depth int, ttl_ms bigint) LANGUAGE plpgsql AS $f$
  DECLARE
    r @T%ROWTYPE;
    now_ts timestamptz := clock_timestamp();
    v_until timestamptz := clock_timestamp() + p_lease * interval '1 millisecond';
    existed bool;
    f bigint;
    v_kind int;
    v_fence bigint;
    v_depth int;
    v_ttl bigint;
  BEGIN
    IF p_lease IS NULL OR p_lease <= 0 THEN RAISE EXCEPTION 'dlock: lease out of range: %', p_lease; END IF;
    -- A grant is reported only once durable: with the server's
    -- synchronous_commit off, a crash would forget it and hand the lock out
    -- again with the same fence. Raised for this transaction only.
    IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
      PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    IF p_held = 0 THEN
      -- Serialized with undos of the same name (below in _release), so a
      -- tombstone is seen by every copy of its acquire that comes later.
      PERFORM pg_advisory_xact_lock(hashtextextended('@T ' || p_name, 0));
      IF EXISTS (SELECT 1 FROM @T_tombstones t
                 WHERE t.name = p_name AND t.grant_id = p_grant AND t.expires_at > now_ts) THEN
        -- A stray copy of an undone grant: lost, as core/lock_line.hpp says.
        RETURN QUERY SELECT 2, 0::bigint, 0, 0::bigint; RETURN;
      END IF;
    END IF;
    LOOP
      SELECT * INTO r FROM @T l WHERE l.name = p_name FOR UPDATE;
      existed := FOUND;
      IF NOT existed OR r.expires_at <= now_ts THEN
        IF p_held > 0 THEN RETURN QUERY SELECT 2, 0::bigint, 0, 0::bigint; RETURN; END IF;
        -- Shared holders or a line: a caller not in line has everyone
        -- ahead of it (core/lock_line.hpp), and decides there.
        IF existed AND r.line THEN
          SELECT a.kind, a.fence, a.depth, a.ttl_ms INTO v_kind, v_fence, v_depth, v_ttl
            FROM @T_line_acquire(p_name, p_owner, p_grant, 0, p_lease, false, 0, false, p_info) a;
          IF v_kind = 0 THEN PERFORM @T_join(p_name, p_member, v_ttl, p_waited); END IF;
          RETURN QUERY SELECT v_kind, v_fence, v_depth, v_ttl;
          RETURN;
        END IF;
        -- Kept for the waiter a release woke: only it takes it meanwhile.
        IF existed AND r.woken IS NOT NULL AND r.woken_until > now_ts AND r.woken <> p_member THEN
          v_ttl := greatest(0, ceil(extract(epoch FROM r.woken_until - now_ts) * 1000))::bigint;
          PERFORM @T_join(p_name, p_member, v_ttl, p_waited);
          RETURN QUERY SELECT 0, 0::bigint, 0, v_ttl;
          RETURN;
        END IF;
        IF NOT existed THEN
          -- The fence is drawn only once the row is ours (locked): a number
          -- drawn before could lose the race to a later one, whose holder
          -- might then release before this insert lands, and fences would
          -- go backwards.
          INSERT INTO @T VALUES (p_name, p_owner, p_grant, 1, 0, v_until) ON CONFLICT (name) DO NOTHING;
          IF NOT FOUND THEN CONTINUE; END IF;  -- inserted by another session meanwhile: look again
        END IF;
        IF p_waited THEN DELETE FROM @T_waiters x WHERE x.name = p_name AND x.member = p_member; END IF;
        f := nextval('@T_fence');
        UPDATE @T l SET owner = p_owner, grant_id = p_grant, depth = 1, fence = f, expires_at = v_until,
            info = p_info, granted_at = now_ts, woken = NULL, woken_until = NULL,
            waiters = existed AND r.waiters AND EXISTS (SELECT 1 FROM @T_waiters x WHERE x.name = p_name)
          WHERE l.name = p_name;
        RETURN QUERY SELECT 1, f, 1, 0::bigint; RETURN;
      END IF;
      IF r.owner = p_owner AND r.grant_id = p_grant THEN
        IF r.depth = p_held THEN
          r.depth := r.depth + 1;
        ELSIF r.depth <> p_held + 1 THEN  -- not a replay either
          RETURN QUERY SELECT 3, 0::bigint, r.depth, 0::bigint; RETURN;
        END IF;
        UPDATE @T l SET depth = r.depth, expires_at = greatest(r.expires_at, v_until) WHERE l.name = p_name;
        RETURN QUERY SELECT 1, r.fence, r.depth, 0::bigint; RETURN;
      END IF;
      IF p_held > 0 THEN RETURN QUERY SELECT 2, 0::bigint, 0, 0::bigint; RETURN; END IF;
      v_ttl := greatest(0, ceil(extract(epoch FROM r.expires_at - now_ts) * 1000))::bigint;
      PERFORM @T_join(p_name, p_member, v_ttl, p_waited);
      RETURN QUERY SELECT 0, 0::bigint, 0, v_ttl;
      RETURN;
    END LOOP;
  END $f$;

  CREATE OR REPLACE FUNCTION @T_release(p_name text, p_owner text, p_grant bigint, p_held int, p_all bool,
                                         p_tomb bigint)
  RETURNS TABLE (kind int, depth int) LANGUAGE plpgsql AS $f$
  DECLARE
    r @T%ROWTYPE;
    handed int := 0;
    woke bool := false;
  BEGIN
    IF p_tomb > 0 THEN
      PERFORM pg_advisory_xact_lock(hashtextextended('@T ' || p_name, 0));
      DELETE FROM @T_tombstones t WHERE t.expires_at <= clock_timestamp();
      INSERT INTO @T_tombstones AS t
        VALUES (p_name, p_grant, clock_timestamp() + p_tomb * interval '1 millisecond')
        ON CONFLICT (name, grant_id) DO UPDATE SET expires_at = greatest(t.expires_at, EXCLUDED.expires_at);
    END IF;
    SELECT * INTO r FROM @T l WHERE l.name = p_name FOR UPDATE;
    IF FOUND AND r.line THEN
      -- A line's state changes only under its row's lock (every line call
      -- takes it), so this one may decide for the line: first its steps 1
      -- and 2, then the release, which hands over.
      IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
        PERFORM set_config('synchronous_commit', 'on', true);  -- a hand-over is a grant
      END IF;
      PERFORM @T_line_settle(p_name, clock_timestamp(), NULL, NULL);
      SELECT * INTO r FROM @T l WHERE l.name = p_name;
    END IF;
    IF NOT FOUND OR r.expires_at <= clock_timestamp() THEN RETURN QUERY SELECT 1, 0; RETURN; END IF;
    IF r.owner <> p_owner OR r.grant_id <> p_grant THEN RETURN QUERY SELECT 2, 0; RETURN; END IF;
    IF p_all OR r.depth = p_held THEN
      IF p_all OR r.depth <= 1 THEN
        IF r.line THEN
          UPDATE @T l SET owner = '', grant_id = 0, depth = 0, expires_at = '-infinity', info = NULL
            WHERE l.name = p_name;
          handed := @T_line_settle(p_name, clock_timestamp(), NULL, NULL);
          IF handed = 0 THEN PERFORM @T_wake_if_free(p_name); END IF;
        ELSE
          -- Its first waiter is woken alone, and the row kept for it.
          IF r.waiters THEN woke := @T_wake_next(p_name); END IF;
          IF NOT woke THEN DELETE FROM @T l WHERE l.name = p_name; END IF;
        END IF;
        IF handed = 0 THEN PERFORM pg_notify('@C', p_name); END IF;  -- else the hand-over's NOTIFY
        RETURN QUERY SELECT 0, 0; RETURN;
      END IF;
      UPDATE @T l SET depth = r.depth - 1 WHERE l.name = p_name;
      RETURN QUERY SELECT 0, r.depth - 1; RETURN;
    END IF;
    IF r.depth = p_held - 1 THEN RETURN QUERY SELECT 0, r.depth; RETURN; END IF;  -- a replay
    RETURN QUERY SELECT 3, r.depth;
  END $f$;

  CREATE OR REPLACE FUNCTION @T_renew(p_names text[], p_owners text[], p_grants bigint[], p_leases bigint[])
  RETURNS SETOF int LANGUAGE plpgsql AS $f$
  DECLARE r @T%ROWTYPE;
  BEGIN
    -- As in _acquire: a renewal forgotten in a crash would shorten the lease
    -- under its holder.
    IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
      PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_names, 1), 0) LOOP
      SELECT * INTO r FROM @T l WHERE l.name = p_names[i] FOR UPDATE;
      IF NOT FOUND OR r.expires_at <= clock_timestamp() THEN
        RETURN NEXT 0;
      ELSIF r.owner <> p_owners[i] OR r.grant_id <> p_grants[i] THEN
        RETURN NEXT 2;
      ELSE
        UPDATE @T l SET expires_at = clock_timestamp() + p_leases[i] * interval '1 millisecond'
          WHERE l.name = p_names[i];
        RETURN NEXT 1;
      END IF;
    END LOOP;
  END $f$;


  -- Lines: the decisions of core/lock_line.cpp, one for one, serialized per
  -- name by the advisory lock every fresh grant of the name takes. Times
  -- are the server's (clock_timestamp()).

  -- Keeps the row's `line` true exactly while the name has shared holders
  -- or waiters, the row itself there (free) while it does, and a free or
  -- expired row without them gone.
  CREATE OR REPLACE FUNCTION @T_line_mark(p_name text, p_now timestamptz)
  RETURNS void LANGUAGE plpgsql AS $f$
  DECLARE
    r @T%ROWTYPE;
    lined bool := EXISTS (SELECT 1 FROM @T_line x WHERE x.name = p_name);
  BEGIN
    SELECT * INTO r FROM @T l WHERE l.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
      IF lined THEN
        INSERT INTO @T (name, owner, grant_id, depth, fence, expires_at, info, line)
          VALUES (p_name, '', 0, 0, 0, '-infinity', NULL, true);
      END IF;
    ELSIF NOT lined AND r.expires_at <= p_now THEN
      DELETE FROM @T l WHERE l.name = p_name;
    ELSIF r.line <> lined THEN
      UPDATE @T l SET line = lined WHERE l.name = p_name;
    END IF;
  END $f$;

  -- Steps 1 and 2: purge what expired, then promote the head of the line
  -- while it is compatible with the holders. Each waiter granted is told by
  -- a NOTIFY naming it (fence, grant, owner), except the caller itself
  -- (p_skip_*: it learns it from its own answer). The caller holds the
  -- name's row lock if the row exists (every line call takes the name's
  -- advisory lock, then the row lock; a release finds its row locked
  -- first). Returns how many were granted.
  CREATE OR REPLACE FUNCTION @T_line_settle(p_name text, p_now timestamptz, p_skip_owner text, p_skip_grant bigint)
  RETURNS int LANGUAGE plpgsql AS $f$
  DECLARE
    r @T%ROWTYPE;
    w @T_line%ROWTYPE;
    row_live bool;
    n int := 0;
    n_shared int;
    f bigint;
    v_msg text;
  BEGIN
    -- The row lock first, before any change to the line: a release holding
    -- it and promoting must never wait for this call's changes.
    SELECT * INTO r FROM @T l WHERE l.name = p_name FOR UPDATE;
    row_live := FOUND AND r.expires_at > p_now;
    DELETE FROM @T_line x WHERE x.name = p_name AND x.expires_at <= p_now;
    DELETE FROM @T_line_tombs t WHERE t.name = p_name AND t.expires_at <= p_now;
    LOOP
      SELECT * INTO w FROM @T_line x WHERE x.name = p_name AND NOT x.holder ORDER BY x.ticket LIMIT 1;
      EXIT WHEN NOT FOUND OR row_live;
      SELECT count(*) INTO n_shared FROM @T_line x WHERE x.name = p_name AND x.holder;
      IF w.shared THEN
        EXIT WHEN w.permits > 0 AND n_shared >= w.permits;
        f := nextval('@T_fence');
        UPDATE @T_line x SET holder = true, depth = 1, fence = f, granted_at = p_now,
            expires_at = p_now + w.lease_ms * interval '1 millisecond'
          WHERE x.name = p_name AND x.owner = w.owner AND x.grant_id = w.grant_id;
      ELSE
        EXIT WHEN n_shared > 0;
        f := nextval('@T_fence');
        INSERT INTO @T AS l (name, owner, grant_id, depth, fence, expires_at, info, granted_at)
          VALUES (p_name, w.owner, w.grant_id, 1, f, p_now + w.lease_ms * interval '1 millisecond', w.info, p_now)
          ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, grant_id = EXCLUDED.grant_id, depth = 1,
            fence = EXCLUDED.fence, expires_at = EXCLUDED.expires_at, info = EXCLUDED.info,
            granted_at = EXCLUDED.granted_at;
        DELETE FROM @T_line x WHERE x.name = p_name AND x.owner = w.owner AND x.grant_id = w.grant_id;
        row_live := true;
      END IF;
      n := n + 1;
      IF w.owner IS DISTINCT FROM p_skip_owner OR w.grant_id IS DISTINCT FROM p_skip_grant THEN
        -- Unit separator, 'h', then fence:lease:grant:owner-bytes:owner and
        -- the name: never a plain release's payload (the bare name) in
        -- practice. The lease tells the other waiters how long a recipient
        -- that died keeps it (nothing is published when that runs out).
        v_msg := chr(31) || 'h' || f || ':' || w.lease_ms || ':' || w.grant_id || ':' || octet_length(w.owner) || ':' ||
                 w.owner || p_name;
        PERFORM pg_notify(CASE WHEN w.client IS NULL THEN '@C' ELSE 'dlockw_' || w.client END, v_msg);
        IF w.client IS NOT NULL THEN PERFORM pg_notify('@C', chr(31) || 'c' || p_name); END IF;  -- observers
      END IF;
    END LOOP;
    -- The waiter now first in line hears of the last hand-over too: it
    -- looks again by that grant's lease (a recipient that died keeps the
    -- lock that long, and nothing is told when it runs out).
    IF v_msg IS NOT NULL THEN
      SELECT * INTO w FROM @T_line x WHERE x.name = p_name AND NOT x.holder ORDER BY x.ticket LIMIT 1;
      IF FOUND AND w.client IS NOT NULL THEN PERFORM pg_notify('dlockw_' || w.client, v_msg); END IF;
    END IF;
    PERFORM @T_line_mark(p_name, p_now);
    RETURN n;
  END $f$;

  -- $1..$5 as _acquire; p_shared: the mode; p_permits: shared holders at
  -- once (0: no limit); p_queued: join or keep a place in the line when
  -- busy; p_info: shown by inspect. kind: 0 busy (ttl_ms: the hint, -1: wait
  -- for an event), 1 granted, 2 lost, 3 mismatch, 4 permits disagree (depth:
  -- the name's permits), 5 a change of mode (depth 1: held shared, 0: held
  -- exclusively).
  CREATE OR REPLACE FUNCTION @T_line_acquire(p_name text, p_owner text, p_grant bigint, p_held int, p_lease bigint,
                                              p_shared bool, p_permits int, p_queued bool, p_info text,
                                              p_client text DEFAULT NULL)
  RETURNS TABLE (kind int, fence bigint, depth int, ttl_ms bigint) LANGUAGE plpgsql AS $f$
  DECLARE
    now_ts timestamptz := clock_timestamp();
    v_until timestamptz := clock_timestamp() + p_lease * interval '1 millisecond';
    r @T%ROWTYPE;
    h @T_line%ROWTYPE;
    row_live bool;
    v_permits int := CASE WHEN p_shared THEN coalesce(p_permits, 0) ELSE 0 END;
    v_other int;
    v_ticket bigint;
    placed bool;
    ahead bool;
    fits bool;
    n_shared int;
    f bigint;
    until_ts timestamptz;
    after bigint;
  BEGIN
    IF p_lease IS NULL OR p_lease <= 0 THEN RAISE EXCEPTION 'dlock: lease out of range: %', p_lease; END IF;
    IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
      PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('@T ' || p_name, 0));
    PERFORM @T_line_settle(p_name, now_ts, p_owner, p_grant);
    SELECT * INTO r FROM @T l WHERE l.name = p_name;  -- locked by _line_settle
    row_live := FOUND AND r.expires_at > now_ts;
    -- Mine: a re-entry, a replay, or this caller's own hand-over.
    IF row_live AND r.owner = p_owner AND r.grant_id = p_grant THEN
      IF r.depth = p_held THEN
        r.depth := r.depth + 1;
      ELSIF r.depth <> p_held + 1 THEN
        RETURN QUERY SELECT 3, 0::bigint, r.depth, 0::bigint; RETURN;
      END IF;
      UPDATE @T l SET depth = r.depth, expires_at = greatest(r.expires_at, v_until) WHERE l.name = p_name;
      RETURN QUERY SELECT 1, r.fence, r.depth, 0::bigint; RETURN;
    END IF;
    SELECT * INTO h FROM @T_line x
      WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant AND x.holder;
    IF FOUND THEN
      IF h.depth = p_held THEN
        h.depth := h.depth + 1;
      ELSIF h.depth <> p_held + 1 THEN
        RETURN QUERY SELECT 3, 0::bigint, h.depth, 0::bigint; RETURN;
      END IF;
      UPDATE @T_line x SET depth = h.depth, expires_at = greatest(h.expires_at, v_until)
        WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant;
      RETURN QUERY SELECT 1, h.fence, h.depth, 0::bigint; RETURN;
    END IF;
    IF p_held > 0
       OR EXISTS (SELECT 1 FROM @T_line_tombs t WHERE t.name = p_name AND t.owner = p_owner AND t.grant_id = p_grant)
       OR EXISTS (SELECT 1 FROM @T_tombstones t
                  WHERE t.name = p_name AND t.grant_id = p_grant AND t.expires_at > now_ts) THEN
      RETURN QUERY SELECT 2, 0::bigint, 0, 0::bigint; RETURN;
    END IF;
    -- An upgrade (or downgrade) would wait for itself.
    IF p_shared AND row_live AND r.owner = p_owner THEN
      RETURN QUERY SELECT 5, 0::bigint, 0, 0::bigint; RETURN;
    END IF;
    IF NOT p_shared AND EXISTS (SELECT 1 FROM @T_line x WHERE x.name = p_name AND x.holder AND x.owner = p_owner) THEN
      RETURN QUERY SELECT 5, 0::bigint, 1, 0::bigint; RETURN;
    END IF;
    IF p_shared THEN
      SELECT x.permits INTO v_other FROM @T_line x WHERE x.name = p_name AND x.shared LIMIT 1;
      IF FOUND AND v_other <> v_permits THEN RETURN QUERY SELECT 4, 0::bigint, v_other, 0::bigint; RETURN; END IF;
    END IF;
    SELECT x.ticket INTO v_ticket FROM @T_line x
      WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant AND NOT x.holder;
    placed := FOUND;
    -- A caller not in line has everyone in it ahead.
    ahead := EXISTS (SELECT 1 FROM @T_line x
                     WHERE x.name = p_name AND NOT x.holder AND (NOT placed OR x.ticket < v_ticket));
    SELECT count(*) INTO n_shared FROM @T_line x WHERE x.name = p_name AND x.holder;
    fits := NOT row_live AND CASE WHEN p_shared THEN v_permits = 0 OR n_shared < v_permits ELSE n_shared = 0 END;
    IF NOT ahead AND fits THEN
      IF placed THEN
        DELETE FROM @T_line x WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant;
      END IF;
      -- A free lock changes hands without a release: observers look again.
      IF n_shared = 0 THEN PERFORM pg_notify('@C', chr(31) || 'c' || p_name); END IF;
      f := nextval('@T_fence');
      IF p_shared THEN
        INSERT INTO @T_line (name, owner, grant_id, shared, holder, ticket, permits, depth, fence, lease_ms, expires_at,
                              info, granted_at)
          VALUES (p_name, p_owner, p_grant, true, true, 0, v_permits, 1, f, p_lease, v_until, coalesce(p_info, ''),
                  now_ts);
      ELSE
        INSERT INTO @T AS l (name, owner, grant_id, depth, fence, expires_at, info, granted_at)
          VALUES (p_name, p_owner, p_grant, 1, f, v_until, p_info, now_ts)
          ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, grant_id = EXCLUDED.grant_id, depth = 1,
            fence = EXCLUDED.fence, expires_at = EXCLUDED.expires_at, info = EXCLUDED.info,
            granted_at = EXCLUDED.granted_at;
      END IF;
      PERFORM @T_line_mark(p_name, now_ts);
      RETURN QUERY SELECT 1, f, 1, 0::bigint; RETURN;
    END IF;
    IF p_queued THEN
      IF placed THEN
        UPDATE @T_line x SET expires_at = v_until, client = coalesce(p_client, x.client)
          WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant;
      ELSE
        INSERT INTO @T_line (name, owner, grant_id, shared, holder, ticket, permits, depth, fence, lease_ms, expires_at,
                              info, client)
          VALUES (p_name, p_owner, p_grant, p_shared, false, nextval('@T_ticket'), v_permits, 0, 0, p_lease, v_until,
                  coalesce(p_info, ''), p_client);
        PERFORM @T_line_mark(p_name, now_ts);
      END IF;
    END IF;
    -- Busy: retry at the first holder's expiry (no holder: the first
    -- waiter's), and a caller in line within a third of its lease.
    SELECT min(x.expires_at) INTO until_ts FROM @T_line x WHERE x.name = p_name AND x.holder;
    IF row_live THEN until_ts := least(until_ts, r.expires_at); END IF;
    IF until_ts IS NULL THEN
      SELECT min(x.expires_at) INTO until_ts FROM @T_line x WHERE x.name = p_name AND NOT x.holder;
    END IF;
    after := CASE WHEN until_ts IS NULL THEN -1
                  ELSE greatest(0, ceil(extract(epoch FROM until_ts - now_ts) * 1000))::bigint END;
    IF p_queued THEN
      after := CASE WHEN after < 0 THEN greatest(p_lease / 3, 1) ELSE least(after, greatest(p_lease / 3, 1)) END;
    END IF;
    RETURN QUERY SELECT 0, 0::bigint, 0, after;
  END $f$;

  -- A shared hold's release, as _release's on the row.
  CREATE OR REPLACE FUNCTION @T_line_release(p_name text, p_owner text, p_grant bigint, p_held int, p_all bool,
                                              p_tomb bigint)
  RETURNS TABLE (kind int, depth int) LANGUAGE plpgsql AS $f$
  DECLARE
    now_ts timestamptz := clock_timestamp();
    h @T_line%ROWTYPE;
    handed int;
  BEGIN
    IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
      PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('@T ' || p_name, 0));
    PERFORM @T_line_settle(p_name, now_ts, NULL, NULL);
    IF p_tomb > 0 THEN
      INSERT INTO @T_line_tombs AS t VALUES (p_name, p_owner, p_grant, now_ts + p_tomb * interval '1 millisecond')
        ON CONFLICT (name, owner, grant_id) DO UPDATE SET expires_at = greatest(t.expires_at, EXCLUDED.expires_at);
    END IF;
    SELECT * INTO h FROM @T_line x
      WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant AND x.holder;
    IF NOT FOUND THEN
      IF EXISTS (SELECT 1 FROM @T l WHERE l.name = p_name AND l.expires_at > now_ts) THEN
        RETURN QUERY SELECT 2, 0;
      ELSE
        RETURN QUERY SELECT 1, 0;
      END IF;
      RETURN;
    END IF;
    IF p_all OR h.depth = p_held THEN
      IF p_all OR h.depth <= 1 THEN
        DELETE FROM @T_line x WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant;
        handed := @T_line_settle(p_name, now_ts, NULL, NULL);
        IF handed = 0 THEN
          PERFORM pg_notify('@C', p_name);
          PERFORM @T_wake_if_free(p_name);
        END IF;
        RETURN QUERY SELECT 0, 0; RETURN;
      END IF;
      UPDATE @T_line x SET depth = h.depth - 1 WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant;
      RETURN QUERY SELECT 0, h.depth - 1; RETURN;
    END IF;
    IF h.depth = p_held - 1 THEN RETURN QUERY SELECT 0, h.depth; RETURN; END IF;  -- a replay
    RETURN QUERY SELECT 3, h.depth;
  END $f$;

  -- An acquire of a line that ended without a grant: its place goes, and a
  -- hold under its grant (a hand-over, or a grant it never heard of) loses
  -- the level that attempt may have added. Returns how many were granted.
  CREATE OR REPLACE FUNCTION @T_line_abandon(p_name text, p_owner text, p_grant bigint, p_held int, p_tomb bigint)
  RETURNS int LANGUAGE plpgsql AS $f$
  DECLARE
    now_ts timestamptz := clock_timestamp();
    r @T%ROWTYPE;
    h @T_line%ROWTYPE;
    handed int;
    freed bool := false;
  BEGIN
    IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
      PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('@T ' || p_name, 0));
    handed := @T_line_settle(p_name, now_ts, p_owner, p_grant);
    DELETE FROM @T_line x WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant AND NOT x.holder;
    IF p_tomb > 0 THEN
      INSERT INTO @T_line_tombs AS t VALUES (p_name, p_owner, p_grant, now_ts + p_tomb * interval '1 millisecond')
        ON CONFLICT (name, owner, grant_id) DO UPDATE SET expires_at = greatest(t.expires_at, EXCLUDED.expires_at);
    END IF;
    SELECT * INTO r FROM @T l WHERE l.name = p_name;
    IF FOUND AND r.expires_at > now_ts AND r.owner = p_owner AND r.grant_id = p_grant THEN
      IF r.depth = p_held + 1 THEN
        IF p_held = 0 THEN
          DELETE FROM @T l WHERE l.name = p_name;
          freed := true;
        ELSE
          UPDATE @T l SET depth = r.depth - 1 WHERE l.name = p_name;
        END IF;
      END IF;
    ELSE
      SELECT * INTO h FROM @T_line x
        WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant AND x.holder;
      IF FOUND AND h.depth = p_held + 1 THEN
        IF p_held = 0 THEN
          DELETE FROM @T_line x WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant;
          freed := true;
        ELSE
          UPDATE @T_line x SET depth = h.depth - 1
            WHERE x.name = p_name AND x.owner = p_owner AND x.grant_id = p_grant;
        END IF;
      END IF;
    END IF;
    -- The line may have moved even when nothing was held (the abandoned
    -- waiter was its head): promote once more.
    handed := @T_line_settle(p_name, now_ts, p_owner, p_grant);
    IF freed AND handed = 0 THEN
      PERFORM pg_notify('@C', p_name);
      PERFORM @T_wake_if_free(p_name);
    END IF;
    RETURN handed;
  END $f$;

  -- _renew with lines: p_lines[i] also renews a shared holder or a waiter of
  -- the line (a plain entry only ever the row). 0 expired, 1 renewed, 2 taken.
  CREATE OR REPLACE FUNCTION @T_line_renew(p_names text[], p_owners text[], p_grants bigint[], p_leases bigint[],
                                            p_lines bool[])
  RETURNS SETOF int LANGUAGE plpgsql AS $f$
  DECLARE
    r @T%ROWTYPE;
    found_row bool;
    now_ts timestamptz;
  BEGIN
    IF current_setting('synchronous_commit') IN ('off', 'local', 'remote_write') THEN
      PERFORM set_config('synchronous_commit', 'on', true);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_names, 1), 0) LOOP
      now_ts := clock_timestamp();
      SELECT * INTO r FROM @T l WHERE l.name = p_names[i] FOR UPDATE;
      found_row := FOUND AND r.expires_at > now_ts;
      IF found_row AND r.owner = p_owners[i] AND r.grant_id = p_grants[i] THEN
        UPDATE @T l SET expires_at = now_ts + p_leases[i] * interval '1 millisecond' WHERE l.name = p_names[i];
        RETURN NEXT 1;
        CONTINUE;
      END IF;
      IF p_lines[i] THEN
        UPDATE @T_line x SET expires_at = now_ts + p_leases[i] * interval '1 millisecond'
          WHERE x.name = p_names[i] AND x.owner = p_owners[i] AND x.grant_id = p_grants[i] AND x.expires_at > now_ts;
        IF FOUND THEN
          RETURN NEXT 1;
          CONTINUE;
        END IF;
      END IF;
      RETURN NEXT CASE WHEN found_row THEN 2 ELSE 0 END;
    END LOOP;
  END $f$;

  CREATE TABLE IF NOT EXISTS @T_meta (key text PRIMARY KEY, value bigint NOT NULL);
  INSERT INTO @T_meta VALUES ('schema', 7) ON CONFLICT (key) DO UPDATE SET value = 7;
END $do$
