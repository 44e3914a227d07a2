//! Opening the database file safely, and the schema with its migrations.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use super::HistoryError;

/// `PRAGMA application_id`: marks the file as ours, so that a database some
/// other program left at the same path is refused instead of altered.
const APPLICATION_ID: i32 = 0x6167_6e64; // "agnd"

/// Each entry upgrades the schema from version `i` to `i + 1`. Append only:
/// a released step is never edited, because files in the field already ran it.
const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    "
    CREATE TABLE runs (
        id                TEXT PRIMARY KEY NOT NULL,
        seq               INTEGER NOT NULL UNIQUE,
        agent             TEXT NOT NULL,
        request           TEXT NOT NULL,
        state             TEXT NOT NULL,
        outcome           TEXT,
        steps             INTEGER NOT NULL,
        max_steps         INTEGER,
        result            TEXT,
        error             TEXT,
        prompt_tokens     INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        created_at_ms     INTEGER NOT NULL,
        started_at_ms     INTEGER,
        ended_at_ms       INTEGER
    );
    -- startup recovery looks for the few runs not ended
    CREATE INDEX runs_state ON runs(state);
    -- pruning looks for old ended runs
    CREATE INDEX runs_ended_at ON runs(ended_at_ms);

    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq    INTEGER NOT NULL,
        at_ms  INTEGER NOT NULL,
        event  TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );

    CREATE TABLE messages (
        run_id  TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        idx     INTEGER NOT NULL,
        message TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    );
    ",
    // 2: the request in a table of its own. A run's row is rewritten at its
    // start, each step and its end; SQLite rewrites a whole row on update, so
    // a request (up to 1 MiB) in it went to the WAL again at every step. Now
    // it is written once, at creation. (DROP COLUMN: SQLite 3.35, bundled.)
    "
    CREATE TABLE requests (
        run_id  TEXT PRIMARY KEY NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        request TEXT NOT NULL
    );
    INSERT INTO requests (run_id, request) SELECT id, request FROM runs;
    ALTER TABLE runs DROP COLUMN request;
    ",
    // 3: resuming runs. `checkpoint_*` is where the run's last completed
    // step ended (steps, messages of the transcript, a stuck warning owed
    // to the next step), rewritten at each step's end: a resumed run
    // carries exactly that much. Runs recorded before have no checkpoint
    // (NULL) and cannot be resumed: where their last completed step ended
    // is not known. `resumed_*` links a run to the run it continues, one
    // to one (the unique index; it also finds `resumed_by`). No foreign
    // key: pruning the older run leaves the newer one its id.
    "
    ALTER TABLE runs ADD COLUMN checkpoint_steps INTEGER;
    ALTER TABLE runs ADD COLUMN checkpoint_messages INTEGER;
    ALTER TABLE runs ADD COLUMN checkpoint_stuck INTEGER;
    ALTER TABLE runs ADD COLUMN resumed_from TEXT;
    ALTER TABLE runs ADD COLUMN resumed_at_step INTEGER;
    ALTER TABLE runs ADD COLUMN resumed_messages INTEGER;
    CREATE UNIQUE INDEX runs_resumed_from ON runs(resumed_from) WHERE resumed_from IS NOT NULL;
    ",
    // 4: a run's cost at the prices in force when it ran (`[llm]
    // input_price`/`output_price`), stored rather than recomputed, so a
    // price changed later does not rewrite what past runs cost. NULL: no
    // price was configured (and for runs recorded before).
    "
    ALTER TABLE runs ADD COLUMN cost REAL;
    ",
    // 5: a run's plan (`read::plan_at`) found by a seek instead of a scan.
    // Without it every `GET /v1/runs/{id}` read all of the run's events,
    // whole, to find its last `plan_changed`: a few per run among
    // thousands. Partial, so the index holds only those events and costs
    // the other inserts nothing but this test. `read::PLAN_EVENTS` repeats
    // the condition word for word: SQLite uses a partial index only for a
    // query whose WHERE contains its own.
    "
    CREATE INDEX events_plan ON events(run_id, seq)
        WHERE substr(event, 1, 23) = '{\"type\":\"plan_changed\",';
    ",
    // 6: several consecutive events of a run in one row. A step's five
    // events were five rows, and storing events was about half of the
    // writer's work (README, Benchmarks): five inserts, five entries in
    // the (run_id, seq) index. The writer now stores the events a run has
    // in one commit as one row: `seq` its first event's, `last_seq` its
    // last's, `at_ms` the latest of their times (a run's last sign of life
    // stays `MAX(at_ms)`), and `event` their API lines (`{\"seq\":..,\"at_ms\":..,...}`
    // and a newline each). NULL `last_seq`: the row holds the one event
    // `seq`, its `event` the event's object alone, as every row before
    // this version does; `plan_changed` events are always stored so, for
    // `events_plan` above to find them.
    "
    ALTER TABLE events ADD COLUMN last_seq INTEGER;
    ",
];

/// The writer's page cache, in KiB (see `open_writer`).
const WRITER_CACHE_KIB: u32 = 16 << 10;

/// The schema version this build writes and reads.
pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// How long a statement waits for a lock held by another connection before
/// failing: readers and the writer only contend briefly (checkpoints), but a
/// second process opening the same file (an operator's `sqlite3`) may hold
/// one longer.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The state directory holds the daemon's socket and history: only its user
/// may enter it. An existing directory is left as the operator set it.
pub(super) fn create_state_dir(dir: &Path) -> Result<(), HistoryError> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|source| HistoryError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })
}

/// Creates the database file `0600` if it does not exist yet. SQLite would
/// create it with `0644 & !umask`, readable by every local user outside
/// systemd; it gives the `-wal` and `-shm` files the database's own mode, so
/// these follow. An existing file is left as it is.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Opens the writer's connection: checks the file is ours before anything
/// writes to it, then sets the journal and upgrades the schema.
pub(super) fn open_writer(path: &Path) -> Result<Connection, HistoryError> {
    let open_err = |source| HistoryError::Open {
        path: path.to_path_buf(),
        source,
    };
    create_private(path).map_err(|source| HistoryError::CreateFile {
        path: path.to_path_buf(),
        source,
    })?;
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(open_err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;

    // Reading the header is the first access to the file: a file that is not
    // a database fails here, before anything could write to it.
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|source| classify(path, source))?;
    let app_id: i32 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(|source| classify(path, source))?;
    check_ours(&conn, path, version, app_id)?;
    if version > SCHEMA_VERSION {
        return Err(HistoryError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }

    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(open_err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        // Still correct (reads then wait on the writer's locks), only slower.
        tracing::warn!(db = %path.display(), journal_mode = %mode,
            "run history: WAL is not available on this file system; reads will wait for writes");
    }
    keep_wal_files(&conn, path);
    // The WAL grows with each burst of writes and is only reused, never
    // shrunk, after a checkpoint; this truncates it back to 64 MiB so one
    // busy hour does not keep its size on disk for good.
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
        .map_err(open_err)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(open_err)?;
    // A checkpoint copies every page the WAL holds into the database and
    // syncs it; under load the same few pages (the tables' last leaves) are
    // in the WAL many times over, so checkpointing every 64 MiB instead of
    // SQLite's 4 MiB copies each of them a sixteenth as often (at 16 MiB,
    // checkpoints were still a sixth of the writer's time under
    // `cargo bench --bench daemon`). The file is kept at that size after
    // (`journal_size_limit`).
    conn.pragma_update(None, "wal_autocheckpoint", WAL_CHECKPOINT_PAGES)
        .map_err(open_err)?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(open_err)?;
    // The pages the writer touches under load (each live run's leaf in
    // every table and index) outgrow SQLite's 2 MiB default page cache
    // with a few hundred runs in flight; the writer then reads back from
    // the file pages it wrote a moment ago. Negative: KiB, not pages. The
    // cache grows to this only as pages are used.
    conn.pragma_update(None, "cache_size", -(WRITER_CACHE_KIB as i64))
        .map_err(open_err)?;

    migrate(&conn, path, version)?;
    Ok(conn)
}

/// Pages (4 KiB) of WAL after which a commit checkpoints it.
const WAL_CHECKPOINT_PAGES: i64 = 16384;

/// Bytes the WAL file is truncated to after a checkpoint.
const WAL_SIZE_LIMIT: i64 = 64 << 20;

/// Keeps `-wal` and `-shm` when the last connection closes. SQLite deletes
/// them on a clean close and must create them again at the next open: on a
/// full disk it cannot, so a daemon stopped cleanly would not start (not
/// even to serve reads) until space returned. Kept, they cost 32 KiB and a
/// WAL that the checkpoints keep short.
fn keep_wal_files(conn: &Connection, path: &Path) {
    use rusqlite::ffi;
    let mut on: std::os::raw::c_int = 1;
    // SAFETY: `conn.handle()` is valid while `conn` lives; the main
    // database's name is a NUL-terminated literal; SQLITE_FCNTL_PERSIST_WAL
    // reads and writes the int its argument points to, which outlives the
    // call.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_PERSIST_WAL,
            (&mut on as *mut std::os::raw::c_int).cast(),
        )
    };
    if rc != ffi::SQLITE_OK {
        tracing::warn!(db = %path.display(), rc,
            "run history: cannot keep the WAL files; a clean stop on a full disk may keep the next start from opening it");
    }
}

/// Opens a connection for reads: read-only, so a bug in a query can never
/// change the history behind the writer's back.
pub(super) fn open_reader(path: &Path) -> Result<Connection, HistoryError> {
    let err = |source| HistoryError::Open {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(err)?;
    Ok(conn)
}

/// The largest run seq stored, 0 when there is none.
pub(super) fn max_run_seq(conn: &Connection, path: &Path) -> Result<i64, HistoryError> {
    conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM runs", [], |row| {
        row.get(0)
    })
    .map_err(|source| HistoryError::Sqlite {
        path: path.to_path_buf(),
        source,
    })
}

fn classify(path: &Path, source: rusqlite::Error) -> HistoryError {
    if source.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
        HistoryError::NotADatabase {
            path: path.to_path_buf(),
        }
    } else {
        HistoryError::Open {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A file we created carries our application id; a new, empty file carries
/// none and has no tables. Anything else belongs to someone else.
fn check_ours(
    conn: &Connection,
    path: &Path,
    version: i64,
    app_id: i32,
) -> Result<(), HistoryError> {
    let foreign = |reason: String| HistoryError::Foreign {
        path: path.to_path_buf(),
        reason,
    };
    if app_id == APPLICATION_ID {
        return Ok(());
    }
    if app_id != 0 {
        return Err(foreign(format!("its application id is {app_id:#x}")));
    }
    if version != 0 {
        return Err(foreign(format!(
            "it has schema version {version} but no agentd application id"
        )));
    }
    let tables: i64 = conn
        .query_row("SELECT COUNT(*) FROM sqlite_master", [], |row| row.get(0))
        .map_err(|source| classify(path, source))?;
    if tables != 0 {
        return Err(foreign(format!("it already holds {tables} schema objects")));
    }
    Ok(())
}

/// Runs every step from `from` to the current version, each in its own
/// transaction together with its `user_version` bump, so an interrupted
/// upgrade leaves a file at a well-defined version.
fn migrate(conn: &Connection, path: &Path, from: i64) -> Result<(), HistoryError> {
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from.max(0) as usize) {
        let to = i as i64 + 1;
        let step = || -> rusqlite::Result<()> {
            let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "application_id", APPLICATION_ID)?;
            tx.pragma_update(None, "user_version", to)?;
            tx.commit()
        };
        step().map_err(|source| HistoryError::Migrate {
            path: path.to_path_buf(),
            to,
            source,
        })?;
        tracing::info!(db = %path.display(), version = to, "run history: schema upgraded");
    }
    Ok(())
}
