// What both Node adapters share: the pg connection config, auto_explain notices for the
// plan captures, and the simulated work.

import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

// auto_explain in each session, its plans sent to the client as notices: the plan of every
// statement the library runs, nested ones included, as it ran them (EXPLAIN ANALYZE).
const EXPLAIN_OPTIONS = [
  "-c session_preload_libraries=auto_explain",
  "-c auto_explain.log_min_duration=0",
  "-c auto_explain.log_analyze=on",
  "-c auto_explain.log_buffers=on",
  "-c auto_explain.log_timing=on",
  "-c auto_explain.log_format=json",
  "-c auto_explain.log_nested_statements=on",
  "-c auto_explain.log_level=notice",
  "-c client_min_messages=notice",
].join(" ");

export function pgConfig(config, max) {
  const options = [config.connection.options, config.notices ? EXPLAIN_OPTIONS : ""]
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
