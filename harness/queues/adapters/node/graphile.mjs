// graphile-worker through its own API: runMigrations (in the run's schema), addJobs (bulk),
// run() with concurrency = the scenario's workers and a pgPool of our own. The mappings:
//   one_queue          no queueName: jobs run in any order, all at once
//   queue_per_tenant   queueName = the tenant: a named queue runs its jobs one at a time
//
// Completed jobs are deleted, so the task reads its job's moments (created_at, locked_at and
// the server's clock at the end of the work) in one statement before it returns.

import pg from "pg";
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";
import { deferred, forwardPlans, pgConfig, record, version, work } from "./common.mjs";

const TASK = "harness_job";

function pool(config, emit) {
  const created = new pg.Pool(pgConfig(config, config.concurrency + 4));
  created.on("error", (error) => process.stderr.write(`graphile-worker pool: ${error}\n`));
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
  return {
    concurrency: "the repetition's workers",
    pollInterval_ms: config.poll_interval_ms,
    listen: 'LISTEN "jobs:insert" (always)',
    preparedStatements: true,
    queueName: config.mapping === "queue_per_tenant" ? "tenant-<id>" : null,
  };
}

export function unlike() {
  return [];
}

export async function install(config) {
  const pgPool = pool(config);
  await runMigrations({ pgPool, schema: config.schema, logger: quiet() });
  await pgPool.end();
}

function timesQuery(schema) {
  const jobs = `"${schema}"._private_jobs`;
  return `select created_at::text, locked_at::text, clock_timestamp()::text as finished_at from ${jobs} where id = $1`;
}

export async function worker(config, emit) {
  const pgPool = pool(config, config.explain_options ? emit : null);
  await pgPool.query("select 1"); // `ready` means connected: its pool connects lazily
  const stopping = deferred();
  const query = timesQuery(config.schema);
  const task = async (payload, helpers) => {
    await work(payload, config.hold ? stopping.promise : null);
    const { rows } = await helpers.query(query, [helpers.job.id]);
    const { created_at, locked_at, finished_at } = rows[0];
    emit({
      event: "job",
      id: String(helpers.job.id),
      job: payload.n,
      tenant: payload.t,
      enqueued_at: created_at,
      started_at: locked_at,
      finished_at,
    });
  };
  let runner = null;
  return {
    start: async () => {
      runner = await run({
        pgPool,
        schema: config.schema,
        concurrency: config.concurrency,
        pollInterval: config.poll_interval_ms,
        noHandleSignals: true,
        taskList: { [TASK]: task },
        logger: quiet(),
      });
    },
    stop: async () => {
      stopping.resolve();
      if (runner) await runner.stop();
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

// graphile-worker deletes a job when its task succeeds: what is left is unfinished.
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
  await pgPool.end();
  return rows.length;
}

// graphile-worker logs each job at info; only warnings and errors reach stderr.
function quiet() {
  return new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") process.stderr.write(`graphile-worker ${level}: ${message}\n`);
  });
}
