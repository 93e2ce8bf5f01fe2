// graphile-worker through its own API: runMigrations (in the run's schema), addJobs (bulk),
// run() with concurrency = the scenario's workers and a pgPool of our own. The mappings:
//   one_queue          no queueName: jobs run in any order, all at once
//   queue_per_tenant   queueName = the tenant: a named queue runs its jobs one at a time
//   one_queue_tuned    one_queue at its maintainers' settings: the mapping's options
// The options of a tuned mapping (graphile.toml): local_queue_size (localQueue.size) and
// complete_job_batch_delay (completeJobBatchDelay), as its perfTest sets them.
//
// Completed jobs are deleted: a statement trigger of the adapter's (graphile.sql) logs
// each deletion with the job's moments, inside graphile-worker's own delete; the worker
// reads the log for the jobs its task ran, one query for all of them every few
// milliseconds, and reports each with its moments. The task itself adds no round trip.

import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";
import {
  deferred,
  forwardPlans,
  jobStarted,
  pgConfig,
  record,
  version,
  work,
} from "./common.mjs";

const TASK = "harness_job";
const DONE_LOG = readFileSync(new URL("./graphile.sql", import.meta.url), "utf8");
const READ_EVERY_MS = 10; // how often the done log is read while jobs wait to be reported
const STOP_BOUND_MS = 20000; // how long a stopping worker waits for its jobs' deletions

function pool(config, emit) {
  const created = new pg.Pool(pgConfig(config, config.concurrency + 4));
  created.on("error", (error) => process.stderr.write(`graphile-worker pool: ${error}\n`));
  // graphile-worker asks for a handler on each client too (err.red/wpeh): without one, a
  // client's error as the server goes away is raised where no one catches it
  created.on("connect", (client) => {
    client.on("error", (error) => process.stderr.write(`graphile-worker client: ${error}\n`));
  });
  if (emit) forwardPlans(created, emit);
  return created;
}

export async function versions() {
  return {
    "graphile-worker": version("graphile-worker"),
    pg: version("pg"),
  };
}

export function settings(config) {
  const options = config.options ?? {};
  return {
    concurrency: "the repetition's workers (a process's share of them)",
    pollInterval_ms: config.poll_interval_ms,
    listen: 'LISTEN "jobs:insert" (always)',
    preparedStatements: true,
    "localQueue.size": options.local_queue_size ?? -1,
    completeJobBatchDelay: options.complete_job_batch_delay ?? -1,
    processes: config.processes ?? 1,
    queueName: config.mapping === "queue_per_tenant" ? "tenant-<id>" : null,
    finished_at: "its deletion of the job, logged by a statement trigger of the adapter's",
  };
}

export function unlike() {
  return [];
}

export async function install(config) {
  const pgPool = pool(config);
  await runMigrations({ pgPool, schema: config.schema, logger: quiet() });
  const client = await pgPool.connect();
  try {
    await client.query(`set search_path to "${config.schema}"`);
    await client.query(DONE_LOG);
  } finally {
    client.release();
  }
  await pgPool.end();
}

// The worker's own (not the library's) tuning of graphile-worker: a local queue and
// batched completions, where the mapping's options ask for them.
function batching(config) {
  const options = config.options ?? {};
  const worker = {};
  if (options.local_queue_size > 0) worker.localQueue = { size: options.local_queue_size };
  if (options.complete_job_batch_delay >= 0) {
    worker.completeJobBatchDelay = options.complete_job_batch_delay;
  }
  return { worker };
}

// The jobs the task ran, reported once graphile-worker's deletion has logged them.
function doneReporter(pgPool, schema, emit) {
  const waiting = new Map(); // graphile-worker's job id -> payload
  const query = {
    text:
      "select id::text, created_at::text, locked_at::text, finished_at::text " +
      `from "${schema}".harness_graphile_done where id = any($1::bigint[])`,
    rowMode: "array",
  };
  const report = async () => {
    if (waiting.size === 0) return;
    const { rows } = await pgPool.query({ ...query, values: [[...waiting.keys()]] });
    for (const [id, enqueuedAt, startedAt, finishedAt] of rows) {
      const payload = waiting.get(id);
      waiting.delete(id);
      emit({
        event: "job",
        id,
        job: payload.n,
        tenant: payload.t,
        enqueued_at: enqueuedAt,
        started_at: startedAt,
        finished_at: finishedAt,
      });
    }
  };
  // A read that fails (the server crashed, or has no connection to give) is tried again
  // at the next: a rejection left unawaited would end the process, which then no fault
  // of graphile-worker's would have ended.
  const reportOrWait = async () => {
    try {
      await report();
    } catch (error) {
      process.stderr.write(`graphile adapter: reading the jobs done failed, again soon: ${error}\n`);
    }
  };
  let running = true;
  const loop = (async () => {
    while (running) {
      await reportOrWait();
      await sleep(READ_EVERY_MS);
    }
  })();
  return {
    ran: (id, payload) => waiting.set(String(id), payload),
    // After the runner's stop (its last completions flushed): every job reported.
    drain: async () => {
      running = false;
      await loop;
      const until = Date.now() + STOP_BOUND_MS;
      for (await reportOrWait(); waiting.size && Date.now() < until; await reportOrWait()) {
        await sleep(READ_EVERY_MS);
      }
    },
  };
}

function stoppedOnItsOwn(emit, stopped, why) {
  if (stopped) return;
  const message = `the library's worker stopped on its own before the stop (${why})`;
  emit({ event: "error", message: message.slice(0, 3900) });
  // stdout is a pipe, written asynchronously: exit once the line is out
  process.stdout.write("", () => process.exit(1));
}

export async function worker(config, emit) {
  const pgPool = pool(config, config.explain_options ? emit : null);
  await pgPool.query("select 1"); // `ready` means connected: its pool connects lazily
  const stopping = deferred();
  let done = null;
  const task = async (payload, helpers) => {
    jobStarted(emit, helpers.job.id, payload, config.hold);
    await work(payload, config.hold ? stopping.promise : null);
    done.ran(helpers.job.id, payload);
  };
  let runner = null;
  let stopped = false;
  return {
    start: async () => {
      done = doneReporter(pgPool, config.schema, emit);
      runner = await run({
        pgPool,
        schema: config.schema,
        concurrency: config.concurrency,
        pollInterval: config.poll_interval_ms,
        noHandleSignals: true,
        taskList: { [TASK]: task },
        logger: quiet(),
        preset: batching(config),
      });
      // Its runner's promise settles when the runner ends: before the stop, on its own
      // (a fatal error), the process ends as graphile-worker's own command line would,
      // and its supervisor starts it again (Work.stopped in the Python kit, alike).
      runner.promise.then(
        () => stoppedOnItsOwn(emit, stopped, "it returned"),
        (error) => stoppedOnItsOwn(emit, stopped, String(error)),
      );
    },
    stop: async () => {
      stopped = true;
      stopping.resolve();
      if (runner) await runner.stop();
      if (done) await done.drain();
      await pgPool.end();
    },
  };
}

export async function enqueuer(config) {
  const pgPool = pool(config);
  const utils = await makeWorkerUtils({ pgPool, schema: config.schema, logger: quiet() });
  const named = config.mapping === "queue_per_tenant";
  return {
    enqueue: async (jobs) => {
      const specs = jobs.map(([n, t, ms]) => ({
        identifier: TASK,
        payload: { n, t, ms },
        ...(named ? { queueName: `tenant-${t}` } : {}),
      }));
      await utils.addJobs(specs);
    },
    close: async () => {
      await utils.release();
      await pgPool.end();
    },
  };
}

// graphile-worker deletes a job when its task succeeds: what is left is unfinished, and
// what it deleted is done (harness_graphile_done, graphile.sql), with its moments. So a
// job whose worker ended before it said so (its process gone between the deletion and
// the report) is done by the library's own account, not gone without a run.
export async function ledger(config, emit) {
  const pgPool = pool(config);
  const { rows } = await pgPool.query({
    text:
      "select id::text, payload ->> 'n', payload ->> 't', " +
      "case when locked_at is null then 'waiting' else 'running' end, created_at::text " +
      `from "${config.schema}"._private_jobs`,
    rowMode: "array",
  });
  for (const row of rows) emit(record(row));
  const done = await pgPool.query({
    text:
      "select id::text, payload ->> 'n', payload ->> 't', created_at::text, " +
      `locked_at::text, finished_at::text from "${config.schema}".harness_graphile_done`,
    rowMode: "array",
  });
  for (const [id, n, t, enqueuedAt, startedAt, finishedAt] of done.rows) {
    const [job, tenant] = [Number(n), Number(t)];
    emit({ event: "record", id, job, tenant, state: "done", enqueued_at: enqueuedAt, started_at: startedAt, finished_at: finishedAt });
  }
  await pgPool.end();
  return rows.length + done.rows.length;
}

// graphile-worker logs each job at info; only warnings and errors reach stderr.
function quiet() {
  return new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") process.stderr.write(`graphile-worker ${level}: ${message}\n`);
  });
}
