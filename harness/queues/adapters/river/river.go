// River through its own API: rivermigrate (its migrations, in the run's schema),
// Client.InsertMany (its enqueue), and its client with a worker of ours (its fetch,
// its executors, its completer). The mappings:
//
//	one_queue          River's default queue, MaxWorkers = the workers
//	queue_per_tenant   a queue per tenant ("tenant_<id>"), MaxWorkers = the tenant cap each
//	one_queue_tuned    one_queue with the FetchCooldown and FetchPollInterval of the options
//	one_queue_rescued  one_queue with a shorter RescueStuckJobsAfter and JobTimeout
//
// Every other setting is River's default. The options (river.toml): fetch_cooldown_ms,
// fetch_poll_interval_ms, job_timeout_s, rescue_stuck_jobs_after_s.
package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed river.sql
var riverSQL string

const (
	jobKind   = "harness_job"
	stopBound = 25 * time.Second // within the contract's 30 s from `stop` to `stopped`
)

// harnessArgs is the job's payload, as the contract has the adapter store it.
type harnessArgs struct {
	N  int64   `json:"n"`
	T  int64   `json:"t"`
	Ms float64 `json:"ms"`
}

func (harnessArgs) Kind() string { return jobKind }

// setting is River as this config sets it: the mapping's options over its defaults.
type setting struct {
	fetchCooldown     time.Duration
	fetchPollInterval time.Duration
	jobTimeout        time.Duration // 0: River's default (1 minute)
	rescueAfter       time.Duration // 0: River's default (1 hour)
	perTenant         bool
	maxWorkers        int // per queue
	unlike            []string
}

func settingOf(cfg *config) (setting, error) {
	s := setting{
		fetchCooldown: river.FetchCooldownDefault,
		perTenant:     cfg.Mapping == "queue_per_tenant",
		maxWorkers:    max(cfg.Concurrency, 1),
		unlike:        []string{},
	}
	var err error
	if s.fetchCooldown, err = option(cfg, "fetch_cooldown_ms", time.Millisecond, s.fetchCooldown); err != nil {
		return s, err
	}
	asked := time.Duration(cfg.PollIntervalMs * float64(time.Millisecond))
	if s.fetchPollInterval, err = option(cfg, "fetch_poll_interval_ms", time.Millisecond, asked); err != nil {
		return s, err
	}
	if s.jobTimeout, err = option(cfg, "job_timeout_s", time.Second, 0); err != nil {
		return s, err
	}
	if s.rescueAfter, err = option(cfg, "rescue_stuck_jobs_after_s", time.Second, 0); err != nil {
		return s, err
	}
	s.pollNoFasterThanCooldown(cfg, asked)
	if s.perTenant {
		s.maxWorkers = max(cfg.Cap, 1)
		s.unboundAcrossQueues(cfg)
	}
	if cfg.Hold {
		s.jobTimeout = -1 // a plan capture's jobs are held until the stop
	}
	return s, nil
}

// option is the mapping's option `name` in `unit`s, or `otherwise` where it has none.
func option(cfg *config, name string, unit time.Duration, otherwise time.Duration) (time.Duration, error) {
	value, given := cfg.Options[name]
	if !given {
		return otherwise, nil
	}
	number, ok := value.(float64)
	if !ok || number <= 0 {
		return 0, fmt.Errorf("option %s: %v is not a positive number", name, value)
	}
	return time.Duration(number * float64(unit)), nil
}

// River refuses a FetchPollInterval shorter than its FetchCooldown (Config.validate).
func (s *setting) pollNoFasterThanCooldown(cfg *config, asked time.Duration) {
	if s.fetchPollInterval < s.fetchCooldown {
		s.fetchPollInterval = s.fetchCooldown
	}
	if s.fetchPollInterval == asked {
		return
	}
	why := fmt.Sprintf("River refuses a FetchPollInterval shorter than its FetchCooldown, %s here", ms(s.fetchCooldown))
	if _, given := cfg.Options["fetch_poll_interval_ms"]; given {
		why = "its maintainers' setting, as river bench sets it"
	}
	s.unlike = append(s.unlike, fmt.Sprintf("polls every %s, not every %g ms as the scenario asks (%s)",
		ms(s.fetchPollInterval), cfg.PollIntervalMs, why))
}

// A queue's MaxWorkers bounds that queue alone: a client with a queue per tenant runs
// up to MaxWorkers jobs of every tenant at once, whatever the scenario's workers.
func (s *setting) unboundAcrossQueues(cfg *config) {
	if len(cfg.Tenants) < 2 {
		return
	}
	s.unlike = append(s.unlike, fmt.Sprintf(
		"runs up to %d jobs at once (%d a queue, a queue for each of %d tenants), however many "+
			"workers the scenario has: River's MaxWorkers bounds one queue, and its client has none "+
			"across queues", s.maxWorkers*len(cfg.Tenants), s.maxWorkers, len(cfg.Tenants)))
}

// ms is a duration in milliseconds, as the harness's sentences write it.
func ms(d time.Duration) string {
	return fmt.Sprintf("%g ms", float64(d)/float64(time.Millisecond))
}

func (s *setting) queues(cfg *config) map[string]river.QueueConfig {
	if !s.perTenant {
		return map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.maxWorkers}}
	}
	queues := make(map[string]river.QueueConfig, len(cfg.Tenants))
	for _, tenant := range cfg.Tenants {
		queues[queueOf(tenant)] = river.QueueConfig{MaxWorkers: s.maxWorkers}
	}
	return queues
}

func queueOf(tenant int64) string { return "tenant_" + strconv.FormatInt(tenant, 10) }

func (s *setting) clientConfig(cfg *config, workers *river.Workers, queues map[string]river.QueueConfig) *river.Config {
	return &river.Config{
		FetchCooldown:        s.fetchCooldown,
		FetchPollInterval:    s.fetchPollInterval,
		JobTimeout:           s.jobTimeout,
		Logger:               logger(),
		Queues:               queues,
		RescueStuckJobsAfter: s.rescueAfter,
		Schema:               cfg.Schema,
		Workers:              workers,
	}
}

// describe is what run.json records of the settings, as they are set.
func (s *setting) describe(cfg *config) map[string]any {
	queues := "default"
	if s.perTenant {
		queues = "tenant_<id>, one per tenant"
	}
	return map[string]any{
		"Queues":               queues,
		"MaxWorkers":           s.maxWorkers,
		"FetchCooldown":        s.fetchCooldown.String(),
		"FetchPollInterval":    s.fetchPollInterval.String(),
		"JobTimeout":           orDefault(s.jobTimeout, "1m0s (River's default)"),
		"RescueStuckJobsAfter": orDefault(s.rescueAfter, "1h0m0s (River's default)"),
		"PollOnly":             false,
		"enqueue":              "Client.InsertMany, a batch a transaction",
		"pgxpool.MaxConns":     poolSize(cfg, 1),
		"processes":            max(cfg.Processes, 1),
		"finished_at":          "River's finalized_at, stamped with the server's clock as its completer writes it (river.sql)",
	}
}

func orDefault(d time.Duration, otherwise string) string {
	if d == 0 {
		return otherwise
	}
	return d.String()
}

// River logs warnings and errors to stderr; stdout is the protocol's.
func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// -- the roles ------------------------------------------------------------------------

func versions(cfg *config, out *events) error {
	s, err := settingOf(cfg)
	if err != nil {
		return err
	}
	out.emit(map[string]any{
		"event":               "versions",
		"versions":            moduleVersions(),
		"settings":            s.describe(cfg),
		"unlike_the_scenario": s.unlike,
	})
	return nil
}

// moduleVersions are those the binary was built with (go.sum pins them).
func moduleVersions() map[string]string {
	found := map[string]string{"go": runtime.Version()}
	names := map[string]string{
		"github.com/riverqueue/river":                        "river",
		"github.com/riverqueue/river/riverdriver/riverpgxv5": "riverpgxv5",
		"github.com/jackc/pgx/v5":                            "pgx",
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, module := range info.Deps {
			if name, wanted := names[module.Path]; wanted {
				found[name] = module.Version
			}
		}
	}
	return found
}

func install(ctx context.Context, cfg *config, out *events) error {
	// River's own check of the schema (its name becomes part of its LISTEN channels')
	if _, err := river.NewClient(riverpgxv5.New(nil), &river.Config{Schema: cfg.Schema}); err != nil {
		out.emit(map[string]any{"event": "refused", "reason": "River refuses the schema: " + err.Error()})
		return nil
	}
	pool, err := newPool(ctx, cfg, 2, nil, true)
	if err != nil {
		return err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger(), Schema: cfg.Schema})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("River's migrations: %w", err)
	}
	if _, err := pool.Exec(ctx, sqlBlock("finished_at_from_the_server")); err != nil {
		return fmt.Errorf("river.sql finished_at_from_the_server: %w", err)
	}
	out.emit(map[string]any{"event": "installed"})
	return nil
}

func ledger(ctx context.Context, cfg *config, out *events) error {
	pool, err := newPool(ctx, cfg, 1, nil, true)
	if err != nil {
		return err
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, sqlBlock("ledger"), jobKind)
	if err != nil {
		return err
	}
	defer rows.Close()
	count := 0
	for rows.Next() {
		var id, state, enqueuedAt string
		var job, tenant *int64
		var startedAt, finishedAt *string
		if err := rows.Scan(&id, &job, &tenant, &state, &enqueuedAt, &startedAt, &finishedAt); err != nil {
			return err
		}
		out.emit(map[string]any{
			"event": "record", "id": id, "job": job, "tenant": tenant, "state": state,
			"enqueued_at": enqueuedAt, "started_at": startedAt, "finished_at": finishedAt,
		})
		count++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	out.emit(map[string]any{"event": "recorded", "count": count})
	return nil
}

func serveEnqueuer(ctx context.Context, cfg *config, out *events, next <-chan command) error {
	s, err := settingOf(cfg)
	if err != nil {
		return err
	}
	pool, err := newPool(ctx, cfg, 2, nil, false)
	if err != nil {
		return err
	}
	defer pool.Close()
	client, err := river.NewClient(riverpgxv5.New(pool), s.clientConfig(cfg, workers(nil), nil))
	if err != nil {
		return err
	}
	out.emit(map[string]any{"event": "ready"})
	for c := range next {
		switch c.Cmd {
		case "enqueue":
			if _, err := client.InsertMany(ctx, s.insertParams(c.Jobs)); err != nil {
				return fmt.Errorf("River's InsertMany: %w", err)
			}
			out.emit(map[string]any{"event": "enqueued", "count": len(c.Jobs)})
		case "stop":
			out.emit(map[string]any{"event": "stopped"})
			return nil
		default:
			return fmt.Errorf("an enqueuer takes no command %q", c.Cmd)
		}
	}
	return errors.New("stdin ended without a stop")
}

func (s *setting) insertParams(jobs [][3]float64) []river.InsertManyParams {
	params := make([]river.InsertManyParams, len(jobs))
	for i, job := range jobs {
		args := harnessArgs{N: int64(job[0]), T: int64(job[1]), Ms: job[2]}
		params[i] = river.InsertManyParams{Args: args}
		if s.perTenant {
			params[i].InsertOpts = &river.InsertOpts{Queue: queueOf(args.T)}
		}
	}
	return params
}

// -- the worker -----------------------------------------------------------------------

// task is the harness's job as River's worker: it says its start, works its job's
// milliseconds and says it done; in a plan capture it holds its job until the stop.
type task struct {
	river.WorkerDefaults[harnessArgs]
	out      *events
	hold     bool
	held     atomic.Int64
	stopping chan struct{}
}

func (t *task) Work(ctx context.Context, job *river.Job[harnessArgs]) error {
	if t.hold {
		t.held.Add(1)
		select {
		case <-t.stopping:
		case <-ctx.Done():
		}
		return nil
	}
	said := map[string]any{"job": job.Args.N, "tenant": job.Args.T, "id": strconv.FormatInt(job.ID, 10)}
	t.out.emit(with(said, "event", "started"))
	if d := time.Duration(job.Args.Ms * float64(time.Millisecond)); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err() // not done: River retries it
		}
	}
	t.out.emit(with(said, "event", "job"))
	return nil
}

func with(event map[string]any, key string, value any) map[string]any {
	copied := make(map[string]any, len(event)+1)
	for k, v := range event {
		copied[k] = v
	}
	copied[key] = value
	return copied
}

func workers(t *task) *river.Workers {
	all := river.NewWorkers()
	if t == nil {
		t = &task{}
	}
	river.AddWorker(all, t)
	return all
}

// worker is River's client (or, in a plan capture of one queue, a client per slot,
// started in turn: River fetches as many jobs as its queue has free slots, so slot k
// fetches once the k jobs before it are held, each fetch with the ones before running).
type worker struct {
	clients  []*river.Client[pgx.Tx]
	task     *task
	mu       sync.Mutex
	stopping bool
	started  []*river.Client[pgx.Tx] // those whose Start was called: a stop stops them
}

func serveWorker(ctx context.Context, cfg *config, out *events, next <-chan command) error {
	s, err := settingOf(cfg)
	if err != nil {
		return err
	}
	w := &worker{task: &task{out: out, hold: cfg.Hold, stopping: make(chan struct{})}}
	slots := 1
	if cfg.Hold && !s.perTenant {
		slots, s.maxWorkers = max(cfg.Concurrency, 1), 1
	}
	pool, err := newPool(ctx, cfg, poolSize(cfg, slots), out, false)
	if err != nil {
		return err
	}
	for range slots {
		client, err := river.NewClient(riverpgxv5.New(pool), s.clientConfig(cfg, workers(w.task), s.queues(cfg)))
		if err != nil {
			pool.Close()
			return err
		}
		w.clients = append(w.clients, client)
	}
	out.emit(map[string]any{"event": "ready"})
	for c := range next {
		switch c.Cmd {
		case "start":
			go w.startInTurn(ctx, out)
		case "stop":
			if w.stop(cfg.Hold) {
				pool.Close() // every client stopped: none holds a connection
			}
			out.emit(map[string]any{"event": "stopped"})
			return nil
		default:
			return fmt.Errorf("a worker takes no command %q", c.Cmd)
		}
	}
	return errors.New("stdin ended without a stop")
}

func (w *worker) startInTurn(ctx context.Context, out *events) {
	for k, client := range w.clients {
		for w.task.held.Load() < int64(k) && !w.isStopping() {
			time.Sleep(5 * time.Millisecond)
		}
		if !w.willStart(client) {
			return
		}
		// A stop during its Start cancels it: River starts its producers one by one (a
		// queue per tenant of a thousand tenants takes a while), each on the context
		// its Stop cancels.
		if err := client.Start(ctx); err != nil && !w.isStopping() {
			out.fail(1, "River's client did not start: "+err.Error())
		}
		go w.failIfItStops(client, out)
	}
}

// willStart counts the client among those a stop stops, unless the stop has come.
func (w *worker) willStart(client *river.Client[pgx.Tx]) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return false
	}
	w.started = append(w.started, client)
	return true
}

func (w *worker) isStopping() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopping
}

// River's client stopping before the stop (it has no reason to, short of a bug): the
// process ends as River's own program would, saying why.
func (w *worker) failIfItStops(client *river.Client[pgx.Tx], out *events) {
	<-client.Stopped()
	if !w.isStopping() {
		out.fail(1, "River's client stopped on its own before the stop")
	}
}

// stop lets the running jobs finish (River's Stop: its producers stop fetching, its
// executors finish, its completer flushes) within the contract's bound; a plan
// capture's held jobs are let go and its fetches cancelled. Whether every client
// stopped in time.
func (w *worker) stop(hold bool) bool {
	w.mu.Lock()
	w.stopping = true
	started := w.started
	w.mu.Unlock()
	close(w.task.stopping)
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	var wg sync.WaitGroup
	var late atomic.Int32
	for _, client := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop := client.Stop
			if hold {
				stop = client.StopAndCancel
			}
			if err := stop(ctx); err != nil {
				late.Add(1)
				fmt.Fprintf(os.Stderr, "river adapter: River's client did not stop within %s: %v\n", stopBound, err)
			}
		}()
	}
	wg.Wait()
	return late.Load() == 0
}

// -- the connection -------------------------------------------------------------------

// poolSize is pgxpool's default (as River's own CLI gets it), and in a plan capture of
// one queue room for each slot's client (each holds a connection for its LISTEN).
func poolSize(cfg *config, clients int) int32 {
	size := max(4, runtime.NumCPU())
	if clients > 1 {
		size += 2 * clients
	}
	return int32(size)
}

// newPool connects to the run's server as the config gives it (with auto_explain's
// settings and its plans forwarded in a plan capture; on the run's schema where River's
// own queries do not name it).
func newPool(ctx context.Context, cfg *config, size int32, plans *events, onSchema bool) (*pgxpool.Pool, error) {
	poolConfig, err := pgxpool.ParseConfig(keywordValues(cfg))
	if err != nil {
		return nil, fmt.Errorf("the connection: %w", err)
	}
	poolConfig.MaxConns = size
	if onSchema {
		poolConfig.ConnConfig.RuntimeParams["search_path"] = `"` + cfg.Schema + `"`
	}
	if plans != nil && cfg.ExplainOptions != nil {
		poolConfig.ConnConfig.OnNotice = func(_ *pgconn.PgConn, notice *pgconn.Notice) {
			if strings.HasPrefix(notice.Message, "duration:") {
				plans.emit(map[string]any{"event": "plan", "message": notice.Message})
			}
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, poolConfig)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil { // `ready` means connected: the pool is lazy
		pool.Close()
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return pool, nil
}

// keywordValues is libpq's keyword/value form of the config's connection, which pgx
// reads as libpq does; the run's options and auto_explain's joined in `options`.
func keywordValues(cfg *config) string {
	c := cfg.Connection
	parts := []string{}
	add := func(key string, value *string) {
		if value != nil && *value != "" {
			quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(*value)
			parts = append(parts, key+"='"+quoted+"'")
		}
	}
	add("host", c.Host)
	if c.Port != nil {
		port := strconv.Itoa(*c.Port)
		add("port", &port)
	}
	add("user", c.User)
	add("password", c.Password)
	add("dbname", c.Dbname)
	add("sslmode", c.Sslmode)
	add("application_name", c.ApplicationName)
	options := strings.TrimSpace(deref(c.Options) + " " + deref(cfg.ExplainOptions))
	add("options", &options)
	return strings.Join(parts, " ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sqlBlock is the named block of river.sql (`-- name: NAME` to the next).
func sqlBlock(name string) string {
	blocks := strings.Split("\n"+riverSQL, "\n-- name: ")
	for _, block := range blocks[1:] {
		if title, body, _ := strings.Cut(block, "\n"); strings.TrimSpace(title) == name {
			return body
		}
	}
	panic("river.sql has no block " + name)
}
