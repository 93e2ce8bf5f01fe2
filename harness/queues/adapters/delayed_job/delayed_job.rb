# Delayed::Job (Ruby, its ActiveRecord backend on PostgreSQL) through its own code, as an
# adapter of the contract, protocol 2 (docs/adapters.md): its table from its own migration
# template, Delayed::Job.enqueue (a batch in one transaction), its own worker loop
# (Delayed::Worker#start, one process per worker, as `delayed_job -n N` runs them), and
# a payload object that sleeps the job's duration. The mappings:
#   one_queue              no queue: every worker reads every job, in DJ's order
#                          (priority, run_at)
#   queue_per_tenant       queue = "tenant-<id>"; the workers read every queue
#   priority_per_tenant    priority = the job's rank among its tenant's jobs this enqueuer
#                          has enqueued (0 for each tenant's first): a tenant's n-th job
#                          waits behind every tenant's earlier ones
#   one_queue_lock_expiry  one_queue, with the option max_run_time (seconds): a job locked
#                          longer than that is reserved again by any worker
#
# Delayed::Job stamps created_at and locked_at with its process's clock ("all your clients
# must have synchronized clocks"); a trigger installed with its table writes the server's
# clock_timestamp() into both as each row is written, so its moments are the server's,
# like every adapter's. It changes no order: run_at and priority are its own.
#
# The config is the first line on stdin (never an argument: it holds the password); then
# commands on stdin, events on stdout, one JSON object a line. Only this process writes
# stdout: each worker process sends its lines through a pipe of its own, and its own
# stdout goes to stderr (Delayed::Worker prints as it works).

require "erb"
require "json"
require "active_record"
require "delayed_job"
require "delayed_job_active_record"
require "pg"

# The job's payload, {n, t, ms}, as Delayed::Job stores it (YAML in `handler`): a plain
# object of three numbers (not a Struct, whose revival Psych's safe loader refuses).
class HarnessJob
  attr_reader :n, :t, :ms

  def initialize(n, t, ms)
    @n = n
    @t = t
    @ms = ms
  end

  def data?
    n.is_a?(Integer) && t.is_a?(Integer) && ms.is_a?(Numeric)
  end

  def before(job)
    @job_id = job.id
  end

  def perform
    Adapter.started(@job_id, n, t)
    Adapter.work(self)
    created, locked, finished = Delayed::Job.connection.select_rows(
      "select created_at at time zone 'UTC', locked_at at time zone 'UTC', clock_timestamp() " \
      "from delayed_jobs where id = #{Integer(@job_id)}"
    ).first.map { |moment| Adapter.moment(moment) }
    Adapter.emit(event: "job", id: @job_id.to_s, job: n, tenant: t,
                 enqueued_at: created, started_at: locked, finished_at: finished)
  end
end

# A row's `handler` is data, never code: Delayed::Job's own loader (YAML.load_dj) builds
# any object a row names and calls its `perform` (a handler rewritten to
# Delayed::PerformableMethod runs any method of any class). Here every handler is loaded
# with Psych's safe loader, which builds plain data and HarnessJob alone; anything else
# is a DeserializationError, which the worker records as the job's failure, unperformed.
module SafeHandler
  def payload_object
    @payload_object ||= SafeHandler.load(handler)
  end

  def self.load(yaml)
    job = Psych.safe_load(yaml, permitted_classes: [HarnessJob], aliases: false)
    return job if job.is_a?(HarnessJob) && job.data?

    raise Delayed::DeserializationError, "Job failed to load: not a HarnessJob of numbers"
  rescue Psych::Exception => e
    raise Delayed::DeserializationError, "Job failed to load: #{e.message}"
  end
end
Delayed::Backend::ActiveRecord::Job.prepend(SafeHandler)

module Adapter
  STATES = { "waiting" => "waiting", "running" => "running", "failed" => "failed" }.freeze
  SERVER_CLOCK = <<~SQL.freeze
    create function delayed_jobs_server_clock() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' then
        new.created_at := clock_timestamp() at time zone 'UTC';
      elsif new.locked_at is not null and new.locked_at is distinct from old.locked_at then
        new.locked_at := clock_timestamp() at time zone 'UTC';
      end if;
      return new;
    end $$;
    create trigger delayed_jobs_server_clock before insert or update of locked_at
      on delayed_jobs for each row execute function delayed_jobs_server_clock();
  SQL

  module_function

  def emit(event)
    line = JSON.generate(event) + "\n"
    (@out || $stdout).write(line)
    (@out || $stdout).flush
  end

  def fail!(message, code = 1)
    emit(event: "error", message: message.to_s[0, 3900])
    exit!(code)
  end

  def next_command
    line = $stdin.gets
    line.nil? ? { "cmd" => "stop" } : JSON.parse(line)
  end

  # A timestamptz as PostgreSQL writes it (text), kept as the server gave it.
  def moment(value)
    value.is_a?(String) ? value : value.utc.strftime("%Y-%m-%d %H:%M:%S.%6N+00:00")
  end

  def connect(config)
    c = config["connection"]
    options = [c["options"], config["explain_options"]].compact.reject(&:empty?).join(" ")
    spec = {
      adapter: "postgresql", host: c["host"], port: c["port"], username: c["user"],
      password: c["password"], database: c["dbname"], sslmode: c["sslmode"],
      application_name: c["application_name"], schema_search_path: config["schema"],
      options: (options unless options.empty?),
      min_messages: config["explain_options"] ? "notice" : "warning",
    }.compact
    ActiveRecord::Base.establish_connection(spec)
    ActiveRecord::Base.connection.execute("select 1")
    forward_plans if config["explain_options"]
  end

  def forward_plans
    ActiveRecord::Base.connection.raw_connection.set_notice_processor do |message|
      text = message.sub(/\ANOTICE:\s+/, "").chomp
      emit(event: "plan", message: text) if text.start_with?("duration:")
    end
  end

  def configure(config)
    @config = config
    Delayed::Worker.logger = nil
    Delayed::Worker.sleep_delay = config["poll_interval_ms"] / 1000.0
    Delayed::Worker.max_attempts = 1
    Delayed::Worker.max_run_time = max_run_time(config)
    Delayed::Worker.destroy_failed_jobs = false
    Delayed::Worker.default_queue_name = nil
    ActiveRecord::Base.logger = nil
    ActiveRecord::Migration.verbose = false
  end

  # The mapping's option max_run_time (seconds), or Delayed::Job's default (4 hours).
  def max_run_time(config)
    seconds = config["options"].fetch("max_run_time", Delayed::Worker::DEFAULT_MAX_RUN_TIME.to_i)
    return seconds if seconds.is_a?(Integer) && seconds >= 1

    raise ArgumentError, "option max_run_time: whole seconds, at least 1"
  end

  # A run of its task begins, before its work (not in a plan capture, whose jobs are
  # held): a worker killed before the run's `job` held the job.
  def started(job_id, n, t)
    emit(event: "started", id: job_id.to_s, job: n, tenant: t) unless @config["hold"]
  end

  def work(job)
    if @config["hold"]
      parent = Process.ppid
      sleep 0.05 while Process.ppid == parent # a plan capture: held until the worker goes
    elsif job.ms.positive?
      sleep(job.ms / 1000.0)
    end
  end

  def versions(config)
    emit(
      event: "versions",
      versions: {
        ruby: RUBY_VERSION,
        "delayed_job" => Gem::Specification.find_by_name("delayed_job").version.to_s,
        "delayed_job_active_record" =>
          Gem::Specification.find_by_name("delayed_job_active_record").version.to_s,
        activerecord: ActiveRecord::VERSION::STRING,
        pg: PG::VERSION,
      },
      settings: {
        worker_processes: "the repetition's workers",
        sleep_delay_s: config["poll_interval_ms"] / 1000.0,
        reserve_sql_strategy: Delayed::Backend::ActiveRecord.configuration.reserve_sql_strategy,
        max_attempts: 1,
        max_run_time_s: Delayed::Worker.max_run_time.to_i,
        queues: config["mapping"] == "queue_per_tenant" ? "tenant-<id> (every worker reads all)" : nil,
        priority: config["mapping"] == "priority_per_tenant" ? "the job's rank in its tenant" : 0,
        enqueue: "Delayed::Job.enqueue per job, a batch in one transaction",
        server_clock_trigger: true,
      },
      unlike_the_scenario: [],
    )
  end

  # Its table from its own migration template (the Rails generator's), and the trigger.
  def install(_config)
    gem = Gem::Specification.find_by_name("delayed_job_active_record").gem_dir
    template = File.join(gem, "lib/generators/delayed_job/templates/migration.rb")
    version = "[#{ActiveRecord::VERSION::MAJOR}.#{ActiveRecord::VERSION::MINOR}]"
    eval(ERB.new(File.read(template)).result_with_hash(migration_version: version)) # rubocop:disable Security/Eval
    CreateDelayedJobs.new.migrate(:up)
    ActiveRecord::Base.connection.execute(SERVER_CLOCK)
    emit(event: "installed")
  end

  # Delayed::Job deletes a job that succeeded: what is left is unfinished.
  def ledger(_config)
    rows = Delayed::Job.order(:id).map do |job|
      state = job.failed_at ? "failed" : (job.locked_at ? "running" : "waiting")
      payload = job.payload_object
      { event: "record", id: job.id.to_s, job: payload.n, tenant: payload.t, state: state,
        enqueued_at: moment(job.created_at) }
    end
    rows.each { |row| emit(row) }
    emit(event: "recorded", count: rows.size)
  end

  def enqueuer(config)
    emit(event: "ready")
    ranks = Hash.new(0)
    while (command = next_command)["cmd"] != "stop"
      next unless command["cmd"] == "enqueue"

      jobs = command["jobs"]
      Delayed::Job.transaction do
        jobs.each { |n, t, ms| Delayed::Job.enqueue(HarnessJob.new(n, t, ms), **placement(t, ranks)) }
      end
      emit(event: "enqueued", count: jobs.size)
    end
    emit(event: "stopped")
  end

  def placement(tenant, ranks)
    case @config["mapping"]
    when "queue_per_tenant" then { queue: "tenant-#{tenant}" }
    when "priority_per_tenant"
      rank = ranks[tenant]
      ranks[tenant] += 1
      { priority: rank }
    else {}
    end
  end

  def worker(config)
    emit(event: "ready")
    command = next_command
    command = next_command until %w[start stop].include?(command["cmd"])
    return emit(event: "stopped") if command["cmd"] == "stop"

    ActiveRecord::Base.connection_pool.disconnect!
    children = Array.new(config["concurrency"]) { spawn_worker(config) }
    relay(children, config)
    emit(event: "stopped")
  end

  # One Delayed::Worker in a process of its own, its lines through a pipe to this one.
  def spawn_worker(config)
    reader, writer = IO.pipe
    parent = Process.pid
    pid = fork do
      reader.close
      $stdin.reopen(File::NULL)
      $stdout.reopen($stderr) # Delayed::Worker prints as it works: never onto the protocol
      writer.sync = true
      @out = writer
      Thread.new { sleep 0.2 while Process.ppid == parent; exit!(1) } # dies with us
      connect(config)
      Delayed::Worker.new(quiet: true).start
      exit!(0)
    end
    writer.close
    { pid: pid, reader: reader }
  end

  # The workers' lines onto stdout, whole, until each has exited; a stop on stdin is
  # passed on (TERM: each finishes its job; in a plan capture, whose jobs hold, KILL).
  def relay(children, config)
    open = children.map { |child| child[:reader] }
    watched = open + [$stdin]
    until open.empty?
      ready, = IO.select(watched)
      ready.each do |io|
        if io.equal?($stdin)
          next unless next_command["cmd"] == "stop"

          watched.delete($stdin)
          stop(children, config)
        elsif (line = io.gets)
          $stdout.write(line)
          $stdout.flush
        else
          open.delete(io)
          watched.delete(io)
        end
      end
    end
    children.each { |child| Process.wait(child[:pid]) }
  end

  def stop(children, config)
    signal = config["hold"] ? "KILL" : "TERM"
    children.each { |child| Process.kill(signal, child[:pid]) }
  end
end

begin
  config = Adapter.next_command
  roles = %w[install versions ledger worker enqueuer]
  unless config["protocol"] == 2 && roles.include?(config["role"])
    Adapter.fail!("no config of protocol 2 as the first line on stdin", 2)
  end
  Adapter.configure(config)
  Adapter.connect(config) unless config["role"] == "versions"
  Adapter.public_send(config["role"], config)
  exit!(0)
rescue SystemExit
  raise
rescue Exception => e # rubocop:disable Lint/RescueException
  Adapter.fail!("#{e.class}: #{e.message}")
end
