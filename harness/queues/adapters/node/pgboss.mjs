// pg-boss through its own API: install (its migrations, in the run's schema), insert (bulk),
// work() with localConcurrency = the scenario's workers. The mappings:
//   one_queue          every job in the queue "harness"
//   group_concurrency  each job's group is its tenant; work() takes groupConcurrency = cap
//   one_queue_tuned    one_queue at its maintainers' settings: the mapping's options
//   one_queue_heartbeat  one_queue, its queue created with heartbeatSeconds (the option
//                      heartbeat_seconds): a job whose worker's heartbeats stop is retried
// The options of a tuned mapping (pgboss.toml): batch_size (batchSize) and
// burst_when_batch_full (burstWhenBatchFull), each worker running its batch's jobs one
// after another.
//
// Each job's moments are pg-boss's own (created_on, started_on: now() of its insert and its
// fetch), read with the server's clock as its work ends, in one statement.

import { PgBoss } from "pg-boss";
import {
  deferred,
  forwardPlans,
  jobStarted,
  pgConfig,
  record,
  version,
  work,
} from "./common.mjs";

const QUEUE = "harness";
const MIN_POLL_S = 0.5; // pg-boss refuses a pollingIntervalSeconds below it
const STATES = { created: "waiting", retry: "waiting", active: "running", completed: "done" };

function pollSeconds(config) {
  return Math.max(config.poll_interval_ms / 1000, MIN_POLL_S);
}

function options(config) {
  return {
    ...pgConfig(config, config.concurrency + 4),
    schema: config.schema,
    schedule: false,
    supervise: config.role === "worker",
    migrate: config.role === "install",
    useListenNotify: config.role === "worker",
    queueCacheIntervalSeconds: 1,
  };
}

async function started(config, emit) {
  const boss = new PgBoss(options(config));
  boss.on("error", (error) => process.stderr.write(`pg-boss: ${error.stack ?? error}\n`));
  if (emit) {
    const db = boss.getDb();
    await db.open();
    forwardPlans(db.pool, emit);
  }
  await boss.start();
  return boss;
}

export async function versions() {
  return { "pg-boss": version("pg-boss"), pg: version("pg") };
}

function batchSize(config) {
  return config.options?.batch_size ?? 1;
}

export function settings(config) {
  return {
    localConcurrency: "the repetition's workers",
    batchSize: batchSize(config),
    burstWhenBatchFull: Boolean(config.options?.burst_when_batch_full),
    handler: "a batch's jobs one after another",
    pollingIntervalSeconds: pollSeconds(config),
    pollingIntervalSeconds_requested: config.poll_interval_ms / 1000,
    notifyPollingIntervalSeconds: pollSeconds(config),
    useListenNotify: true,
    "queue notify": true,
    burstWhenReadyExceeds: 1,
    queueCacheIntervalSeconds: 1,
    groupConcurrency: config.mapping === "group_concurrency" ? config.cap : null,
    heartbeatSeconds: heartbeatSeconds(config),
  };
}

export function unlike(config) {
  if (pollSeconds(config) * 1000 <= config.poll_interval_ms) return [];
  return [
    `polls every ${pollSeconds(config)} s, not every ${config.poll_interval_ms} ms as the ` +
      `scenario asks (pg-boss refuses less than ${MIN_POLL_S} s)`,
  ];
}

function heartbeatSeconds(config) {
  return config.options?.heartbeat_seconds ?? null; // null: off, its default
}

export async function install(config) {
  const boss = await started(config);
  const heartbeat = heartbeatSeconds(config);
  await boss.createQueue(QUEUE, {
    notify: true,
    ...(heartbeat === null ? {} : { heartbeatSeconds: heartbeat }),
  });
  await boss.stop({ graceful: true, wait: true });
}

function timesQuery(schema) {
  return (
    "select created_on::text, started_on::text, clock_timestamp()::text " +
    `from "${schema}".job where name = $1 and id = $2`
  );
}

export async function worker(config, emit) {
  const boss = await started(config, config.explain_options ? emit : null);
  const stopping = deferred();
  const times = timesQuery(config.schema);
  const reading = new Set();
  // The moments are read once the work is done, without holding up pg-boss's completion
  // of the job (the handler returns at once): its pace is its own, as without us.
  const report = async (job) => {
    const { rows } = await boss.getDb().executeSql(times, [QUEUE, job.id]);
    const [enqueuedAt, startedAt, finishedAt] = Object.values(rows[0]);
    emit({
      event: "job",
      id: job.id,
      job: job.data.n,
      tenant: job.data.t,
      enqueued_at: enqueuedAt,
      started_at: startedAt,
      finished_at: finishedAt,
    });
  };
  const handler = async (jobs) => {
    // pg-boss hands the handler its batch active at once: each job is held from then on
    for (const job of jobs) jobStarted(emit, job.id, job.data, config.hold);
    for (const job of jobs) {
      await work(job.data, config.hold ? stopping.promise : null);
      const read = report(job).catch((error) => {
        emit({ event: "error", message: `reading job ${job.id}: ${error}` });
        process.exit(1);
      });
      reading.add(read);
      read.finally(() => reading.delete(read));
    }
  };
  const workOptions = {
    localConcurrency: config.concurrency,
    batchSize: batchSize(config),
    burstWhenBatchFull: Boolean(config.options?.burst_when_batch_full),
    pollingIntervalSeconds: pollSeconds(config),
    // With LISTEN/NOTIFY on, its poll would otherwise back off to 30 s, and it waits out
    // that interval after every fetch that finds a job, unless a NOTIFY comes meanwhile.
    notifyPollingIntervalSeconds: pollSeconds(config),
    burstWhenReadyExceeds: 1,
    ...(config.mapping === "group_concurrency" ? { groupConcurrency: config.cap } : {}),
  };
  return {
    start: async () => {
      await boss.work(QUEUE, workOptions, handler);
    },
    stop: async () => {
      stopping.resolve();
      await boss.stop({ graceful: true, wait: true, timeout: 30000, close: false });
      await Promise.all(reading);
      await boss.stop({ graceful: true, wait: true });
    },
  };
}

export async function enqueuer(config) {
  const boss = await started(config);
  const group = config.mapping === "group_concurrency";
  return {
    enqueue: async (jobs) => {
      const inserts = jobs.map(([n, t, ms]) => ({
        data: { n, t, ms },
        ...(group ? { group: { id: String(t) } } : {}),
      }));
      await boss.insert(QUEUE, inserts);
    },
    close: () => boss.stop({ graceful: true, wait: true }),
  };
}

// pg-boss keeps completed jobs (until its retention deletes them, days later).
export async function ledger(config, emit) {
  const boss = await started(config);
  const { rows } = await boss
    .getDb()
    .executeSql(
      "select id::text as id, data ->> 'n' as n, data ->> 't' as t, state::text as state, " +
        "created_on::text as created " +
        `from "${config.schema}".job where name = $1`,
      [QUEUE],
    );
  for (const row of rows) {
    const [id, n, t, state, created] = Object.values(row);
    emit(record([id, n, t, STATES[state] ?? "failed", created]));
  }
  await boss.stop({ graceful: true, wait: true });
  return rows.length;
}
