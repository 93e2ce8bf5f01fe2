package tqb.dbscheduler;

import com.google.gson.JsonArray;

/** A job as db-scheduler stores it (task_data, JSON by its GsonSerializer): {n, t, ms}. */
public final class Payload {
  long n;
  int t;
  double ms;

  static Payload of(JsonArray job) {
    Payload payload = new Payload();
    payload.n = job.get(0).getAsLong();
    payload.t = job.get(1).getAsInt();
    payload.ms = job.get(2).getAsDouble();
    return payload;
  }
}
