// The Node adapters of the contract, protocol 2 (docs/adapters.md): pg-boss and
// graphile-worker, one process per program, the library named by the manifest's command.
//
//   node runner.mjs pgboss|graphile     (the config is the first line on stdin)
//
// The config comes on stdin, never as an argument: a command line is readable by every
// local user (ps, /proc/<pid>/cmdline), and the config holds the password. Then commands
// on stdin ({"cmd": "start"}, {"cmd": "enqueue", "jobs": [[n, tenant, ms], ...]},
// {"cmd": "stop"}; a closed stdin is a stop), events on stdout, one JSON object a line:
// nothing else is ever written to stdout; the libraries' own logs go to stderr.

import readline from "node:readline";

const LIBRARIES = { pgboss: "./pgboss.mjs", graphile: "./graphile.mjs" };
const NODE_NEEDED = [22, 18];

function emit(event) {
  process.stdout.write(JSON.stringify(event) + "\n");
}

function fail(message, code = 1) {
  emit({ event: "error", message: String(message).slice(0, 3900) });
  process.exit(code);
}

function checkNode() {
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (major < NODE_NEEDED[0] || (major === NODE_NEEDED[0] && minor < NODE_NEEDED[1])) {
    fail(`node ${process.versions.node}; ${NODE_NEEDED.join(".")} or newer needed`, 2);
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
  } else {
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
  const library = LIBRARIES[process.argv[2]];
  if (!library) fail(`no such library: ${process.argv[2]}; one of ${Object.keys(LIBRARIES)}`, 2);
  const next = commands();
  const config = await next();
  if (config.protocol !== 1 && config.protocol !== 2) {
    fail("no config of protocol 1 or 2 as the first line on stdin", 2);
  }
  const adapter = await import(library);
  if (config.role === "versions") {
    emit({
      event: "versions",
      versions: { node: process.versions.node, ...(await adapter.versions()) },
      settings: adapter.settings(config),
      unlike_the_scenario: adapter.unlike(config),
    });
  } else if (config.role === "install") {
    await adapter.install(config);
    emit({ event: "installed" });
  } else if (config.role === "ledger") {
    const count = await adapter.ledger(config, emit);
    emit({ event: "recorded", count });
  } else {
    await serve(adapter, config, next);
  }
  await flushed();
  process.exit(0);
}

// Everything written to stdout reaches the harness before the exit: a pipe the harness has
// not read yet takes a write only in part, and exit() drops the rest (a ledger of
// thousands of records was cut mid-line).
function flushed() {
  return new Promise((resolve) => process.stdout.write("", resolve));
}

main().catch((error) => fail(error?.stack ?? String(error)));
