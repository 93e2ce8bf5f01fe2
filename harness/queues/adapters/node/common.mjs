// What both Node adapters share: the connection as node-postgres takes it (in a plan
// capture with the harness's auto_explain settings), the plans forwarded as events, the
// simulated work, the ledger's states.

import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

// libpq's connection parts (the config's) as node-postgres takes them. libpq's sslmode
// becomes its ssl: `require` encrypts without checking the certificate, the verify modes
// check it; without it node-postgres never asks for TLS.
export function pgConfig(config, max) {
  const { host, port, user, password, dbname, sslmode, options, application_name } = config.connection;
  const settings = [options, config.explain_options].filter(Boolean).join(" ");
  const ssl =
    sslmode === "require" ? { rejectUnauthorized: false }
    : sslmode === "verify-ca" || sslmode === "verify-full" ? { rejectUnauthorized: true }
    : undefined;
  const given = { host, port, user, password, database: dbname, application_name, ssl };
  const defined = Object.fromEntries(Object.entries(given).filter(([, value]) => value != null));
  return { ...defined, max, ...(settings ? { options: settings } : {}) };
}

// Plans arrive as notices on whichever pooled connection ran the statement.
export function forwardPlans(pool, emit) {
  pool.on("connect", (client) => {
    client.on("notice", (notice) => {
      if (String(notice.message).startsWith("duration:")) {
        emit({ event: "plan", message: notice.message });
      }
    });
  });
}

// A run of its task begins, before its work (not in a plan capture, whose jobs are held):
// a worker killed before the run's `job` held the job.
export function jobStarted(emit, id, payload, hold) {
  if (!hold) emit({ event: "started", id: String(id), job: payload.n, tenant: payload.t });
}

// The job's work: its duration, or, in a plan capture, until the worker stops (a job held
// keeps its slot, so each capture's fetch sees the ones before it running).
export async function work(payload, holdUntil) {
  if (holdUntil) return holdUntil;
  if (payload.ms > 0) await sleep(payload.ms);
}

export function deferred() {
  let resolve;
  const promise = new Promise((done) => (resolve = done));
  return { promise, resolve };
}

export function version(name) {
  const file = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(file, "utf8")).version;
}

// A ledger row ([id, n, t, state, created]) as the contract's record.
export function record([id, job, tenant, state, enqueuedAt]) {
  return { event: "record", id, job: Number(job), tenant: Number(tenant), state, enqueued_at: enqueuedAt };
}
