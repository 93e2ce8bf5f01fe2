// pg-boss through its own API: install (its migrations, in the run's schema), insert (bulk),
// work() with localConcurrency = the scenario's workers. The mappings:
//   one_queue          every job in the queue "harness"
//   group_concurrency  each job's group is its tenant; work() takes groupConcurrency = cap
// A tuned mapping fetches config.batchSize jobs at a time (burstWhenBatchFull), each
// worker running its batch's jobs one after another.

import { PgBoss } from "pg-boss";
import { deferred, forwardPlans, pgConfig, version, work } from "./common.mjs";

const QUEUE = "harness";

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

export async function install(config) {
  const boss = await started(config);
  await boss.createQueue(QUEUE, { notify: true });
  await boss.stop({ graceful: true, wait: true });
}

export async function worker(config, emit) {
  const boss = await started(config, config.notices ? emit : null);
  const stopping = deferred();
  const handler = async (jobs) => {
    for (const job of jobs) {
      await work(job.data, config.notices ? stopping.promise : null);
      emit({ event: "job", id: job.id, job: job.data.n, tenant: job.data.t });
    }
  };
  const workOptions = {
    localConcurrency: config.concurrency,
    batchSize: config.batchSize,
    burstWhenBatchFull: config.batchSize > 1,
    pollingIntervalSeconds: config.pollIntervalMs / 1000,
    // With LISTEN/NOTIFY on, its poll would otherwise back off to 30 s, and it waits out
    // that interval after every fetch that finds a job, unless a NOTIFY comes meanwhile.
    notifyPollingIntervalSeconds: config.pollIntervalMs / 1000,
    burstWhenReadyExceeds: 1,
    ...(config.mapping === "group_concurrency" ? { groupConcurrency: config.cap } : {}),
  };
  return {
    start: async () => {
      await boss.work(QUEUE, workOptions, handler);
    },
    stop: async () => {
      stopping.resolve();
      await boss.stop({ graceful: true, wait: true, timeout: 30000 });
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
