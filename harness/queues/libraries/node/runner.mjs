// The harness's side of pg-boss and graphile-worker: one process, one library, one role.
//
//   node runner.mjs        (no arguments: the config is the first line on stdin)
//
// config: { library: "pgboss" | "graphile", role: "install" | "worker" | "enqueuer" |
// "versions", connection: {host, port, user, password, database}, schema, mapping,
// concurrency, pollIntervalMs, cap, notices, batchSize (pg-boss), localQueueSize and
// completeJobBatchDelay (graphile-worker; -1: off) }. It comes on stdin, never as an argument:
// a command line is readable by every local user (ps, /proc/<pid>/cmdline), and the
// config holds the password. An adapter gets its password through its stdin config (or
// a file of mode 0600), never its argv.
//
// It talks to the harness in JSON lines: the config, then commands on stdin ({"cmd":
// "start"}, {"cmd": "stop"}, {"cmd": "enqueue", "jobs": [[number, tenant, ms], ...]}); a
// closed stdin is a stop. Events on stdout
// ({"event": "ready"}, {"event": "job", ...}, {"event": "enqueued", "count": n},
// {"event": "plan", ...}, {"event": "stopped"}, {"event": "error", "message": ...}).
// Nothing else is written to stdout; the libraries' own logs go to stderr.

import readline from "node:readline";

const NODE_MAJOR_NEEDED = 22;

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

function fail(message) {
  emit({ event: "error", message });
  process.exit(1);
}

function checkNode() {
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < NODE_MAJOR_NEEDED || (major === NODE_MAJOR_NEEDED && minor < 18)) {
    emit({ event: "error", message: `node ${process.versions.node}; 22.18 or newer needed` });
    process.exit(2);
  }
}

function commands() {
  const lines = readline.createInterface({ input: process.stdin });
  const waiting = [];
  const queued = [];
  lines.on("line", (line) => {
    const command = JSON.parse(line);
    (waiting.shift() ?? ((c) => queued.push(c)))(command);
  });
  lines.on("close", () => {
    const stop = { cmd: "stop" };
    for (const resolve of waiting.splice(0)) resolve(stop);
    queued.push(stop);
  });
  return () => new Promise((resolve) => (queued.length ? resolve(queued.shift()) : waiting.push(resolve)));
}

async function serve(adapter, config, next) {
  if (config.role === "worker") {
    const work = await adapter.worker(config, emit);
    emit({ event: "ready" });
    for (let command = await next(); command.cmd !== "stop"; command = await next()) {
      if (command.cmd === "start") await work.start();
    }
    await work.stop();
  } else if (config.role === "enqueuer") {
    const enqueuer = await adapter.enqueuer(config);
    emit({ event: "ready" });
    for (let command = await next(); command.cmd !== "stop"; command = await next()) {
      if (command.cmd === "enqueue") {
        await enqueuer.enqueue(command.jobs);
        emit({ event: "enqueued", count: command.jobs.length });
      }
    }
    await enqueuer.close();
  }
  emit({ event: "stopped" });
}

async function main() {
  checkNode();
  const next = commands();
  const config = await next();
  if (!config.library) fail("no config: the first line on stdin is the config JSON");
  const adapter = await import(`./${config.library}.mjs`);
  if (config.role === "versions") {
    emit({ event: "versions", node: process.versions.node, ...(await adapter.versions()) });
  } else if (config.role === "install") {
    await adapter.install(config);
    emit({ event: "installed" });
  } else {
    await serve(adapter, config, next);
  }
  process.exit(0);
}

main().catch((error) => fail(error?.stack ?? String(error)));
