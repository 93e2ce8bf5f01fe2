// What both Node adapters share: the pg connection config (in a plan capture with the
// harness's auto_explain settings, `explainOptions`), the plans forwarded as events, and
// the simulated work.

import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

export function pgConfig(config, max) {
  const options = [config.connection.options, config.explainOptions ?? ""]
    .filter(Boolean)
    .join(" ");
  return { ...config.connection, max, ...(options ? { options } : {}) };
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
