package tqb.dbscheduler;

import com.github.kagkarlsson.scheduler.SchedulerClient;
import com.github.kagkarlsson.scheduler.serializer.GsonSerializer;
import com.github.kagkarlsson.scheduler.task.SchedulableInstance;
import com.github.kagkarlsson.scheduler.task.Task;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.io.InputStream;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import javax.sql.DataSource;

/**
 * db-scheduler (Java) as an adapter of the harness's contract, protocol 2
 * (docs/adapters.md): its table as its repository gives it, its SchedulerClient's batch
 * schedule, its Scheduler with the worker's slots as threads, a one-time task that sleeps
 * the job's duration, and its own table read back for the ledger. The mappings and their
 * settings: dbscheduler.toml and docs/real-queues.md.
 *
 * <p>The config is the first line on stdin (never an argument: it holds the password);
 * then commands on stdin, events on stdout, one JSON object a line. The libraries' logs go
 * to stderr.
 */
public final class Main {
  static final SqlBlocks SQL = sqlBlocks();
  private static final List<String> ROLES =
      List.of("install", "versions", "ledger", "worker", "enqueuer");

  private Main() {}

  public static void main(String[] args) {
    Wire.keepStdoutForEvents();
    try {
      JsonObject config = Wire.config();
      if (config == null
          || !config.has("protocol")
          || config.get("protocol").getAsInt() != 2
          || !ROLES.contains(config.get("role").getAsString())) {
        Wire.fail("no config of protocol 2 as the first line on stdin", 2);
      }
      Settings settings = new Settings(config);
      run(config.get("role").getAsString(), config, settings);
      System.err.flush();
      Runtime.getRuntime().halt(0);
    } catch (Throwable e) {
      e.printStackTrace();
      Wire.fail(e.getClass().getName() + ": " + e.getMessage(), 1);
    }
  }

  private static void run(String role, JsonObject config, Settings settings) throws Exception {
    switch (role) {
      case "versions":
        Wire.emit("versions", "versions", versions(), "settings", settings.shown(),
            "unlike_the_scenario", List.of());
        break;
      case "install":
        install(config);
        break;
      case "ledger":
        ledger(config);
        break;
      case "enqueuer":
        enqueuer(config, settings);
        break;
      default:
        new Worker(config, settings).run();
    }
  }

  private static SqlBlocks sqlBlocks() {
    try {
      return new SqlBlocks(Path.of("dbscheduler.sql"));
    } catch (Exception e) {
      throw new IllegalStateException("dbscheduler.sql: " + e.getMessage(), e);
    }
  }

  static Map<String, Object> versions() {
    Map<String, Object> versions = new HashMap<>();
    versions.put("java", System.getProperty("java.version"));
    versions.put("db-scheduler", mavenVersion("com.github.kagkarlsson", "db-scheduler"));
    versions.put("postgresql-jdbc", org.postgresql.util.DriverInfo.DRIVER_VERSION);
    versions.put("HikariCP", mavenVersion("com.zaxxer", "HikariCP"));
    versions.put("gson", mavenVersion("com.google.code.gson", "gson"));
    return versions;
  }

  /** A jar's version as its own pom.properties says it (what runs, not what was asked). */
  private static String mavenVersion(String group, String artifact) {
    String name = "/META-INF/maven/" + group + "/" + artifact + "/pom.properties";
    try (InputStream in = Main.class.getResourceAsStream(name)) {
      Properties properties = new Properties();
      if (in != null) {
        properties.load(in);
      }
      return properties.getProperty("version", "unknown");
    } catch (Exception e) {
      return "unknown";
    }
  }

  private static void install(JsonObject config) throws Exception {
    DataSource source = Database.open(config, 1);
    try (Connection conn = source.getConnection();
        Statement statement = conn.createStatement()) {
      statement.execute(SQL.get("dbscheduler_tables"));
      statement.execute(SQL.get("dbscheduler_server_clock"));
    } finally {
      Database.close(source);
    }
    Wire.emit("installed");
  }

  private static void ledger(JsonObject config) throws Exception {
    DataSource source = Database.open(config, 1);
    int count = 0;
    try (Connection conn = source.getConnection();
        Statement statement = conn.createStatement();
        ResultSet rows = statement.executeQuery(SQL.get("dbscheduler_ledger"))) {
      while (rows.next()) {
        long job = rows.getLong(2);
        Wire.emit("record", "id", rows.getString(1), "job", rows.wasNull() ? null : job,
            "tenant", rows.getObject(3), "state", rows.getString(4),
            "enqueued_at", rows.getString(5), "started_at", rows.getString(6));
        count++;
      }
    } finally {
      Database.close(source);
    }
    Wire.emit("recorded", "count", count);
  }

  private static void enqueuer(JsonObject config, Settings settings) throws Exception {
    DataSource source = Database.open(config, 2);
    SchedulerClient.Builder builder =
        SchedulerClient.Builder.create(source, Worker.tasks(settings))
            .serializer(new GsonSerializer());
    if (settings.byPriority()) {
      builder.enablePriority();
    }
    SchedulerClient client = builder.build();
    Map<String, Task<Payload>> tasks = new HashMap<>();
    for (Task<?> task : Worker.tasks(settings)) {
      @SuppressWarnings("unchecked")
      Task<Payload> typed = (Task<Payload>) task;
      tasks.put(task.getName(), typed);
    }
    Map<Integer, Integer> ranks = new HashMap<>();
    Wire.emit("ready");
    for (JsonObject command = Wire.next(); !isStop(command); command = Wire.next()) {
      if (!"enqueue".equals(command.get("cmd").getAsString())) {
        continue;
      }
      JsonArray jobs = command.getAsJsonArray("jobs");
      Instant now = Instant.now();
      List<SchedulableInstance<?>> batch = new ArrayList<>(jobs.size());
      for (JsonElement job : jobs) {
        Payload payload = Payload.of(job.getAsJsonArray());
        Task<Payload> task = tasks.get(Settings.taskName(settings.mapping, payload.t));
        int rank = ranks.merge(payload.t, 1, Integer::sum) - 1;
        batch.add(task.instanceBuilder(Long.toString(payload.n)).data(payload)
            .priority(Math.max(0, 32000 - rank)).scheduledTo(now));
      }
      client.scheduleBatch(batch);
      Wire.emit("enqueued", "count", jobs.size());
    }
    Database.close(source);
    Wire.emit("stopped");
  }

  static boolean isStop(JsonObject command) {
    return "stop".equals(command.get("cmd").getAsString());
  }
}
