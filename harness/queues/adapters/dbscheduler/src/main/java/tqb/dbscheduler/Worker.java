package tqb.dbscheduler;

import com.github.kagkarlsson.scheduler.Scheduler;
import com.github.kagkarlsson.scheduler.SchedulerBuilder;
import com.github.kagkarlsson.scheduler.SchedulerName;
import com.github.kagkarlsson.scheduler.serializer.GsonSerializer;
import com.github.kagkarlsson.scheduler.task.ExecutionContext;
import com.github.kagkarlsson.scheduler.task.Task;
import com.github.kagkarlsson.scheduler.task.TaskInstance;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import com.google.gson.JsonObject;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;

/**
 * db-scheduler's Scheduler with the worker's slots as its threads, running the harness's
 * one-time task: `started` as a run begins, the job's duration slept, its moments read
 * from its row and the server's clock, `job`; db-scheduler then deletes the row (a
 * one-time task's completion). In a plan capture (hold) each job holds its thread until
 * the stop, and the slots are schedulers of one thread each, started in turn, so that each
 * one's first fetch runs with the jobs before it held.
 */
final class Worker {
  private final JsonObject config;
  private final Settings settings;
  private final AtomicInteger held = new AtomicInteger();
  private final CountDownLatch never = new CountDownLatch(1);
  private DataSource source;

  Worker(JsonObject config, Settings settings) {
    this.config = config;
    this.settings = settings;
  }

  /** The one-time tasks of a mapping: one, or one per tenant (each named for its tenant). */
  static List<Task<?>> tasks(Settings settings) {
    return tasks(settings, null);
  }

  private static List<Task<?>> tasks(Settings settings, Worker worker) {
    List<String> names = new ArrayList<>();
    if (settings.mapping.equals("task_per_tenant")) {
      settings.tenants.forEach(t -> names.add(Settings.taskName(settings.mapping, t)));
    } else {
      names.add(Settings.ONE_TASK);
    }
    List<Task<?>> tasks = new ArrayList<>();
    for (String name : names) {
      tasks.add(
          Tasks.oneTime(name, Payload.class)
              .execute((instance, context) -> worker.execute(instance, context)));
    }
    return tasks;
  }

  void run() throws Exception {
    int schedulers = settings.hold ? settings.threads : 1;
    int threads = settings.hold ? 1 : settings.threads;
    source = Database.open(config, schedulers * (threads + 3) + 1);
    Wire.emit("ready");
    JsonObject command = Wire.next();
    while (!Main.isStop(command) && !"start".equals(command.get("cmd").getAsString())) {
      command = Wire.next();
    }
    if (Main.isStop(command)) {
      stopped();
      return;
    }
    List<Scheduler> running = new ArrayList<>();
    for (int k = 0; k < schedulers; k++) {
      while (settings.hold && held.get() < k) {
        JsonObject early = Wire.poll(20); // a capture: slot k once k jobs are held
        if (early != null && Main.isStop(early)) {
          stopped();
          return;
        }
      }
      Scheduler scheduler = scheduler(threads, k, schedulers);
      scheduler.start();
      running.add(scheduler);
    }
    while (!Main.isStop(Wire.next())) {
      continue;
    }
    if (settings.hold) {
      stopped(); // a capture's held jobs end unfinished with the process
      return;
    }
    for (Scheduler scheduler : running) {
      scheduler.stop(); // waits for its running executions
    }
    stopped();
  }

  private void stopped() {
    Wire.emit("stopped");
    Database.close(source);
  }

  private Scheduler scheduler(int threads, int k, int of) {
    SchedulerBuilder builder =
        Scheduler.create(source, tasks(settings, this))
            .threads(threads)
            .pollingInterval(settings.pollingInterval)
            .heartbeatInterval(settings.heartbeat)
            .missedHeartbeatsLimit(settings.missedHeartbeats)
            .serializer(new GsonSerializer())
            .schedulerName(new SchedulerName.Fixed(name(k, of)));
    if (settings.polling.equals(Settings.LOCK_AND_FETCH)) {
      builder.pollUsingLockAndFetch(settings.lowerLimit, settings.upperLimit);
    } else {
      builder.pollUsingFetchAndLockOnExecute(settings.lowerLimit, settings.upperLimit);
    }
    if (settings.byPriority()) {
      builder.enablePriority();
    }
    return builder.build();
  }

  private static String name(int k, int of) {
    String pid = Long.toString(ProcessHandle.current().pid());
    return of == 1 ? "harness-" + pid : "harness-" + pid + "-" + k;
  }

  private void execute(TaskInstance<Payload> instance, ExecutionContext context) {
    Payload job = instance.getData();
    String id = instance.getTaskName() + "/" + instance.getId();
    if (settings.hold) {
      held.incrementAndGet();
      awaitForever();
      return;
    }
    Wire.emit("started", "id", id, "job", job.n, "tenant", job.t);
    sleep(job.ms);
    String[] moments = moments(instance);
    Wire.emit("job", "id", id, "job", job.n, "tenant", job.t, "enqueued_at", moments[0],
        "started_at", moments[1], "finished_at", moments[2]);
  }

  private void awaitForever() {
    try {
      never.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("a held job was interrupted", e);
    }
  }

  private static void sleep(double ms) {
    try {
      Thread.sleep((long) ms, (int) ((ms - Math.floor(ms)) * 1_000_000));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted in its work", e);
    }
  }

  /** Its row's moments and the server's clock, before db-scheduler deletes the row. */
  private String[] moments(TaskInstance<Payload> instance) {
    try (Connection conn = source.getConnection();
        PreparedStatement statement = conn.prepareStatement(Main.SQL.get("dbscheduler_moments"))) {
      statement.setString(1, instance.getTaskName());
      statement.setString(2, instance.getId());
      try (ResultSet row = statement.executeQuery()) {
        if (!row.next()) {
          throw new IllegalStateException("no row of its execution " + instance);
        }
        return new String[] {row.getString(1), row.getString(2), row.getString(3)};
      }
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException("reading its moments: " + e.getMessage(), e);
    }
  }
}
