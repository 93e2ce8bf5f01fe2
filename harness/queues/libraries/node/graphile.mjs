// graphile-worker through its own API: runMigrations (in the run's schema), addJobs (bulk),
// run() with concurrency = the scenario's workers and a pgPool of our own. The mappings:
//   one_queue          no queueName: jobs run in any order, all at once
//   queue_per_tenant   queueName = the tenant: a named queue runs its jobs one at a time
//
// Completed jobs are deleted: the harness logs each deletion with the job's times in a
// trigger of its own (libraries.sql, graphile_done_log), so the task sends only its job.
// A tuned mapping sets localQueue.size and completeJobBatchDelay (config).

import pg from "pg";
import { Logger, makeWorkerUtils, run, runMigrations } from "graphile-worker";
import { deferred, forwardPlans, pgConfig, version, work } from "./common.mjs";

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

export async function install(config) {
  const pgPool = pool(config);
  await runMigrations({ pgPool, schema: config.schema, logger: quiet() });
  await pgPool.end();
}

function batching(config) {
  const worker = {};
  if (config.localQueueSize > 0) worker.localQueue = { size: config.localQueueSize };
  if (config.completeJobBatchDelay >= 0) worker.completeJobBatchDelay = config.completeJobBatchDelay;
  return { worker };
}

export async function worker(config, emit) {
  const pgPool = pool(config, config.notices ? emit : null);
  const stopping = deferred();
  const task = async (payload, helpers) => {
    await work(payload, config.notices ? stopping.promise : null);
    emit({ event: "job", id: helpers.job.id, job: payload.n, tenant: payload.t });
  };
  let runner = null;
  return {
    start: async () => {
      runner = await run({
        pgPool,
        schema: config.schema,
        concurrency: config.concurrency,
        pollInterval: config.pollIntervalMs,
        noHandleSignals: true,
        taskList: { [TASK]: task },
        logger: quiet(),
        preset: batching(config),
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

// graphile-worker logs each job at info; only warnings and errors reach stderr.
function quiet() {
  return new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") process.stderr.write(`graphile-worker ${level}: ${message}\n`);
  });
}
