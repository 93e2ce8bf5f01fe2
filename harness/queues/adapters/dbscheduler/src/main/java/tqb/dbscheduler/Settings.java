package tqb.dbscheduler;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What db-scheduler is set to for a config: its mapping of tenants (one task; a task per
 * tenant; a priority per job by its rank in its tenant) and the mapping's options (its
 * polling strategy and limits, its heartbeat), each at db-scheduler 16.7.1's default where
 * the mapping gives none (SchedulerBuilder, PollingStrategyConfig).
 */
final class Settings {
  static final String LOCK_AND_FETCH = "lock_and_fetch";
  static final String FETCH = "fetch_and_lock_on_execute";
  static final String ONE_TASK = "harness-job";

  final String mapping;
  final String polling;
  final double lowerLimit;
  final double upperLimit;
  final Duration pollingInterval;
  final Duration heartbeat;
  final int missedHeartbeats;
  final int threads;
  final boolean hold;
  final List<Integer> tenants = new ArrayList<>();

  Settings(JsonObject config) {
    JsonObject options = config.getAsJsonObject("options");
    mapping = config.get("mapping").getAsString();
    if (!List.of(
            "one_task", "one_task_lock_and_fetch", "one_task_tuned", "one_task_heartbeat",
            "task_per_tenant", "priority_per_tenant")
        .contains(mapping)) {
      throw new IllegalArgumentException("no such mapping: " + mapping);
    }
    polling = string(options, "polling", FETCH);
    if (!polling.equals(FETCH) && !polling.equals(LOCK_AND_FETCH)) {
      throw new IllegalArgumentException("option polling: " + FETCH + " or " + LOCK_AND_FETCH);
    }
    boolean fetch = polling.equals(FETCH);
    // fetch-and-lock-on-execute's defaults (0.5, 3.0: SchedulerBuilder's); lock-and-fetch
    // has none of its own: its README's "for normal usage" 0.5, 1.0.
    lowerLimit = number(options, "lower_limit", 0.5);
    upperLimit = number(options, "upper_limit", fetch ? 3.0 : 1.0);
    pollingInterval = Duration.ofMillis(config.get("poll_interval_ms").getAsLong());
    heartbeat = Duration.ofMillis((long) (number(options, "heartbeat_s", 300) * 1000));
    missedHeartbeats = (int) number(options, "missed_heartbeats", 6);
    threads = config.get("concurrency").getAsInt();
    hold = config.has("hold") && config.get("hold").getAsBoolean();
    JsonArray given = config.getAsJsonArray("tenants");
    if (given != null) {
      for (JsonElement tenant : given) {
        tenants.add(tenant.getAsInt());
      }
    }
  }

  static String taskName(String mapping, int tenant) {
    return mapping.equals("task_per_tenant") ? "tenant-" + tenant : ONE_TASK;
  }

  boolean byPriority() {
    return mapping.equals("priority_per_tenant");
  }

  Map<String, Object> shown() {
    Map<String, Object> shown = new LinkedHashMap<>();
    shown.put("polling_strategy", polling);
    shown.put("lower_limit_fraction_of_threads", lowerLimit);
    shown.put("upper_limit_fraction_of_threads", upperLimit);
    shown.put("threads", "the worker's slots (" + threads + ")");
    shown.put("polling_interval_ms", pollingInterval.toMillis());
    shown.put("heartbeat_interval_s", heartbeat.toMillis() / 1000.0);
    shown.put("missed_heartbeats_limit", missedHeartbeats);
    shown.put("enable_immediate_execution", false);
    shown.put("priority", byPriority() ? "32000 - the job's rank in its tenant, at least 0" : "off");
    shown.put(
        "tasks",
        mapping.equals("task_per_tenant")
            ? "a one-time task per tenant (tenant-<id>), all in one scheduler"
            : "one one-time task (" + ONE_TASK + ")");
    shown.put("serializer", "GsonSerializer (task_data as JSON)");
    shown.put("enqueue", "SchedulerClient.scheduleBatch, a batch per command, to run now");
    shown.put("worker_processes", 1);
    return shown;
  }

  private static String string(JsonObject options, String name, String otherwise) {
    return options.has(name) ? options.get(name).getAsString() : otherwise;
  }

  private static double number(JsonObject options, String name, double otherwise) {
    return options.has(name) ? options.get(name).getAsDouble() : otherwise;
  }
}
