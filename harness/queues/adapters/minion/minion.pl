#!/usr/bin/env perl
# Minion (Perl) through its own API, as an adapter of the contract, protocol 2
# (docs/adapters.md): its PostgreSQL backend's migrations in the run's schema, its
# enqueue, its own worker (Minion::Worker->run: a process per job, `jobs` =
# concurrency), and a task that sleeps the job's duration. The mappings:
#   one_queue        every job in the queue "default", in Minion's order (priority, id)
#   lock_per_tenant  the task takes the named lock "tenant-<id>" ($minion->guard, with
#                    limit = tenant_cap) and, when the tenant is at its cap, puts the job
#                    back with $job->retry({delay => retry_delay_s}): Minion's own pattern.
#   one_queue_repaired one_queue, with the options heartbeat_interval and repair_interval
#                    (its worker's), missing_after (its Minion's) and attempts (each
#                    job's, at its enqueue): a worker gone without a heartbeat is found by
#                    a repair, which fails its jobs and retries those with attempts left.
#
# The config is the first line on stdin (never an argument: it holds the password); then
# commands on stdin, events on stdout, one JSON object a line, written by this process
# only (never by a job's process, whose lines could interleave with a long one of ours).
use strict;
use warnings;

use DBD::Pg;
use IO::Select;
use Minion;
use Mojo::JSON qw(decode_json encode_json);
use Mojo::Pg;
use Mojolicious;
use Time::HiRes qw(sleep);

my $TASK = 'harness_job';
my $QUEUE = 'default';
my %STATES = (inactive => 'waiting', active => 'running', finished => 'done', failed => 'failed');

sub emit {
  my $line = encode_json(shift) . "\n";
  while (length $line) {
    my $written = syswrite STDOUT, $line;
    die "stdout: $!" unless defined $written;
    substr($line, 0, $written) = '';
  }
}

sub fail {
  my ($message, $code) = @_;
  emit({event => 'error', message => substr("$message", 0, 3900)});
  exit($code // 1);
}

sub next_command {
  my $line = <STDIN>;
  return {cmd => 'stop'} unless defined $line;  # a closed stdin is a stop
  return decode_json($line);
}

# libpq's conninfo value, quoted: DBD::Pg hands the DSN after dbi:Pg: to libpq.
sub quoted {
  my $value = shift;
  $value =~ s/(['\\])/\\$1/g;
  return "'$value'";
}

sub pg_of {
  my $config = shift;
  my $c = $config->{connection};
  my @parts;
  for my $name (qw(host port dbname sslmode application_name)) {
    push @parts, "$name=" . quoted($c->{$name}) if defined $c->{$name};
  }
  my $options = join ' ', grep {defined && length} $c->{options}, $config->{explain_options};
  push @parts, 'options=' . quoted($options) if length $options;
  my $pg = Mojo::Pg->new->dsn('dbi:Pg:' . join(';', @parts));
  $pg->username($c->{user}) if defined $c->{user};
  $pg->password($c->{password}) if defined $c->{password};
  return $pg->search_path([$config->{schema}]);
}

sub minion_of {
  my ($config, $on_plan) = @_;
  my $pg = pg_of($config);
  if ($on_plan) {
    my $worker = $$;
    # auto_explain's plans reach DBD::Pg as warnings: only those of this process's own
    # connections (the worker's fetches), never a job process's.
    $pg->on(connection => sub { $_[1]->{PrintWarn} = 1 });
    $SIG{__WARN__} = sub {
      my $text = shift;
      return print STDERR $text unless $$ == $worker && $text =~ s/^NOTICE:\s+(?=duration:)//;
      chomp $text;
      $on_plan->($text);
    };
  }
  my $minion = Minion->new(Pg => $pg);
  my $missing_after = $config->{options}{missing_after};
  $minion->missing_after($missing_after) if defined $missing_after;
  $minion->add_task($TASK => task($config));
  return $minion;
}

sub task {
  my $config = shift;
  my $locks = $config->{mapping} eq 'lock_per_tenant';
  my $options = $config->{options};
  return sub {
    my ($job, $payload) = @_;
    my $guard;
    if ($locks) {
      my %limit = (limit => $config->{cap});
      $guard = $job->minion->guard("tenant-$payload->{t}", $options->{lock_seconds}, \%limit);
      return $job->retry({delay => $options->{retry_delay_s}}) unless $guard;
    }
    work($payload, $config->{hold});
  };
}

sub work {
  my ($payload, $hold) = @_;
  if ($hold) {  # a plan capture: the job keeps its slot until the worker is gone
    my $worker = getppid;
    sleep 0.05 while getppid == $worker;
    return;
  }
  sleep($payload->{ms} / 1000) if $payload->{ms} > 0;
}

sub versions {
  my $config = shift;
  my %settings = (
    jobs => "the repetition's workers",
    dequeue_timeout_s => $config->{poll_interval_ms} / 1000,
    spare => 1,
    spare_min_priority => 1,
    queues => [$QUEUE],
    job_process => 'one per job (Minion::Job->start forks)',
    enqueue => 'one $minion->enqueue per job (Minion has no bulk enqueue)',
    attempts => $config->{options}{attempts} // 1,
    heartbeat_interval => $config->{options}{heartbeat_interval} // 300,
    repair_interval => $config->{options}{repair_interval} // 21600,
    missing_after => $config->{options}{missing_after} // 1800,
  );
  if ($config->{mapping} eq 'lock_per_tenant') {
    $settings{guard} = "tenant-<id>, limit = $config->{cap}";
    $settings{$_} = $config->{options}{$_} for qw(lock_seconds retry_delay_s);
  }
  emit({
    event    => 'versions',
    versions => {
      perl => sprintf('%vd', $^V),
      Minion => $Minion::VERSION,
      'Mojo::Pg' => $Mojo::Pg::VERSION,
      Mojolicious => $Mojolicious::VERSION,
      'DBD::Pg' => $DBD::Pg::VERSION,
    },
    settings            => \%settings,
    unlike_the_scenario => [],
  });
}

sub install {
  my $config = shift;
  minion_of($config)->backend->pg->migrations->migrate;
  emit({event => 'installed'});
}

sub ledger {
  my $config = shift;
  my $rows = minion_of($config)->backend->pg->db->query(
    "select id::text, args -> 0 ->> 'n', args -> 0 ->> 't', state::text, created::text
       from minion_jobs where task = ?", $TASK)->arrays;
  for my $row (@$rows) {
    my ($id, $n, $t, $state, $created) = @$row;
    emit({event => 'record', id => $id, job => 0 + $n, tenant => 0 + $t,
      state => $STATES{$state} // 'failed', enqueued_at => $created});
  }
  emit({event => 'recorded', count => scalar @$rows});
}

sub enqueuer {
  my $config = shift;
  my $minion = minion_of($config);
  $minion->backend->pg->db->query('select 1');
  my %options = (queue => $QUEUE);
  $options{attempts} = $config->{options}{attempts} if defined $config->{options}{attempts};
  emit({event => 'ready'});
  while ((my $command = next_command())->{cmd} ne 'stop') {
    next unless $command->{cmd} eq 'enqueue';
    for my $job (@{$command->{jobs}}) {
      my ($n, $t, $ms) = @$job;
      $minion->enqueue($TASK => [{n => $n, t => $t, ms => $ms}], \%options);
    }
    emit({event => 'enqueued', count => scalar @{$command->{jobs}}});
  }
  emit({event => 'stopped'});
}

sub worker {
  my $config = shift;
  my $minion = minion_of($config, $config->{explain_options} ? \&plan : undef);
  my $db = $minion->backend->pg->db;
  $db->query('select 1');
  emit({event => 'ready'});
  my $command = next_command();
  $command = next_command() while $command->{cmd} ne 'start' && $command->{cmd} ne 'stop';
  return emit({event => 'stopped'}) if $command->{cmd} eq 'stop';
  my $worker = $minion->worker;
  my $status = $worker->status;
  $status->{jobs} = $config->{concurrency};
  $status->{dequeue_timeout} = $config->{poll_interval_ms} / 1000;
  $status->{queues} = [$QUEUE];
  for my $interval (qw(heartbeat_interval repair_interval)) {
    $status->{$interval} = $config->{options}{$interval} if defined $config->{options}{$interval};
  }
  watch($worker, $db, $config->{hold});
  $worker->run;
  report_requeued($worker);
  emit({event => 'stopped'});
}

sub plan { emit({event => 'plan', message => shift}) }

# Each job's start, as Minion's worker dequeues it, and its end, as the worker sees it
# when it reaps the job's process: `finished` (finish_job succeeded: the job is done, its
# moments Minion's own, read from its row) or, for a job its task put back with retry, no
# `finished`: said at the next turn of the loop.
sub watch {
  my ($worker, $db, $hold) = @_;
  my $stdin = IO::Select->new(\*STDIN);
  $worker->{harness_reaped} = {};
  $worker->on(dequeue => sub {
    my ($worker, $job) = @_;
    # A run of its task begins (its process forked next), not in a plan capture, whose
    # jobs are held: a worker killed before the run's `job` held the job.
    emit({event => 'started', id => '' . $job->id, job => 0 + $job->args->[0]{n},
      tenant => 0 + $job->args->[0]{t}}) unless $hold;
    $job->on(reap => sub { $worker->{harness_reaped}{$job->id} = $job });
    $job->on(failed => sub { delete $worker->{harness_reaped}{$job->id} });
    $job->on(finished => sub {
      delete $worker->{harness_reaped}{$job->id};
      my ($created, $started, $finished) = @{$db->query(
        'select created::text, started::text, finished::text from minion_jobs where id = ?',
        $job->id)->array};
      emit({event => 'job', id => '' . $job->id, job => 0 + $job->args->[0]{n},
        tenant => 0 + $job->args->[0]{t}, enqueued_at => $created, started_at => $started,
        finished_at => $finished});
    });
  });
  for my $turn (qw(wait busy)) {
    $worker->on($turn => sub {
      my $worker = shift;
      report_requeued($worker);
      # A stop: the jobs running finish first (TERM); in a plan capture, whose jobs hold
      # their slots, they are killed (QUIT: Minion's "stop immediately").
      kill $hold ? 'QUIT' : 'TERM', $$
        if !$worker->{finished} && $stdin->can_read(0) && stop_said();
    });
  }
}

sub stop_said {
  my $command = next_command();
  return $command->{cmd} eq 'stop';
}

sub report_requeued {
  my $worker = shift;
  for my $job (values %{$worker->{harness_reaped}}) {
    emit({event => 'requeued', id => '' . $job->id, job => 0 + $job->args->[0]{n},
      tenant => 0 + $job->args->[0]{t}});
  }
  $worker->{harness_reaped} = {};
}

my %ROLES = (install => \&install, versions => \&versions, ledger => \&ledger,
  worker => \&worker, enqueuer => \&enqueuer);

eval {
  my $config = next_command();
  fail('no config of protocol 2 as the first line on stdin', 2)
    unless ($config->{protocol} // 0) == 2 && $ROLES{$config->{role} // ''};
  $ROLES{$config->{role}}->($config);
  1;
} or fail($@ || 'unknown error');
exit 0;
