// The River adapter of the contract, protocol 2 (docs/adapters.md): River's own
// migrations, enqueue (InsertMany), client and worker, in Go.
//
//	bin/river-adapter     (the config is the first line on stdin)
//
// The config comes on stdin, never as an argument: a command line is readable by every
// local user, and the config holds the password. Then commands on stdin ({"cmd":
// "start"}, {"cmd": "enqueue", "jobs": [[n, tenant, ms], ...]}, {"cmd": "stop"}; a
// closed stdin is a stop), events on stdout, one JSON object a line: nothing else is
// ever written to stdout; River's own log goes to stderr.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

const maxLine = 16 << 20 // an enqueue of 10,000 jobs is about 200 KB

// connection is libpq's parts of the run's server, as the harness resolved them.
type connection struct {
	Host            *string `json:"host"`
	Port            *int    `json:"port"`
	User            *string `json:"user"`
	Password        *string `json:"password"`
	Dbname          *string `json:"dbname"`
	Sslmode         *string `json:"sslmode"`
	Options         *string `json:"options"`
	ApplicationName *string `json:"application_name"`
}

// config is the first line on stdin: all the adapter is given.
type config struct {
	Protocol       int            `json:"protocol"`
	Role           string         `json:"role"`
	Mapping        string         `json:"mapping"`
	Options        map[string]any `json:"options"`
	Schema         string         `json:"schema"`
	Connection     connection     `json:"connection"`
	Concurrency    int            `json:"concurrency"`
	PollIntervalMs float64        `json:"poll_interval_ms"`
	Cap            int            `json:"cap"`
	Tenants        []int64        `json:"tenants"`
	Processes      int            `json:"processes"`
	Hold           bool           `json:"hold"`
	ExplainOptions *string        `json:"explain_options"`
}

// command is a line on stdin after the config.
type command struct {
	Cmd  string       `json:"cmd"`
	Jobs [][3]float64 `json:"jobs"`
}

func main() {
	out := newEvents()
	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 0, 1<<20), maxLine)
	var cfg config
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &cfg) != nil || (cfg.Protocol != 1 && cfg.Protocol != 2) {
		out.fail(2, "no config of protocol 1 or 2 as the first line on stdin")
	}
	if err := serve(context.Background(), &cfg, out, commands(lines)); err != nil {
		out.fail(1, err.Error())
	}
	out.close()
}

func serve(ctx context.Context, cfg *config, out *events, next <-chan command) error {
	switch cfg.Role {
	case "versions":
		return versions(cfg, out)
	case "install":
		return install(ctx, cfg, out)
	case "ledger":
		return ledger(ctx, cfg, out)
	case "enqueuer":
		return serveEnqueuer(ctx, cfg, out, next)
	case "worker":
		return serveWorker(ctx, cfg, out, next)
	}
	return fmt.Errorf("no such role: %q", cfg.Role)
}

// commands reads stdin's commands as they come; a closed stdin is a stop.
func commands(lines *bufio.Scanner) <-chan command {
	next := make(chan command, 16)
	go func() {
		for lines.Scan() {
			var c command
			if err := json.Unmarshal(lines.Bytes(), &c); err != nil {
				c = command{Cmd: "unreadable: " + err.Error()}
			}
			next <- c
			if c.Cmd == "stop" {
				return
			}
		}
		next <- command{Cmd: "stop"}
	}()
	return next
}

// events writes each event as a JSON line, from any goroutine: a writer of its own
// batches the lines under load and flushes as soon as none is waiting, so that a
// worker killed a moment later has said what it started.
type events struct {
	lines   chan []byte
	written chan struct{}
}

func newEvents() *events {
	e := &events{lines: make(chan []byte, 4096), written: make(chan struct{})}
	go e.write()
	return e
}

func (e *events) write() {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	for line := range e.lines {
		_, _ = out.Write(line)
		if len(e.lines) == 0 {
			_ = out.Flush()
		}
	}
	_ = out.Flush()
	close(e.written)
}

func (e *events) emit(event map[string]any) {
	line, err := json.Marshal(event)
	if err != nil { // only plain values are ever given
		panic(err)
	}
	e.lines <- append(line, '\n')
}

// close returns once every line is out.
func (e *events) close() {
	close(e.lines)
	<-e.written
}

// fail says why in one line (its `error` event) and exits with code.
func (e *events) fail(code int, message string) {
	message = strings.Join(strings.Fields(message), " ")
	if len(message) > 3900 {
		message = message[:3900]
	}
	e.emit(map[string]any{"event": "error", "message": message})
	e.close()
	os.Exit(code)
}
