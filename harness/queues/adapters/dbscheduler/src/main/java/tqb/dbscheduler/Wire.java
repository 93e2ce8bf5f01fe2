package tqb.dbscheduler;

import com.google.gson.Gson;
import com.google.gson.GsonBuilder;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * The contract's wire: events on stdout, one JSON object a line, written by this class
 * alone (System.out is sent to stderr, so that no library's print reaches the protocol);
 * the config and the commands on stdin, read by a thread of their own. A closed stdin is
 * a stop.
 */
final class Wire {
  private static final Gson GSON = new GsonBuilder().disableHtmlEscaping().create();
  private static final PrintStream OUT =
      new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
  private static final BlockingQueue<JsonObject> COMMANDS = new LinkedBlockingQueue<>();
  private static final BufferedReader IN =
      new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

  private Wire() {}

  static void keepStdoutForEvents() {
    System.setOut(System.err);
  }

  static void emit(String event, Object... fields) {
    Map<String, Object> line = new LinkedHashMap<>();
    line.put("event", event);
    for (int i = 0; i < fields.length; i += 2) {
      if (fields[i + 1] != null) {
        line.put((String) fields[i], fields[i + 1]);
      }
    }
    String text = GSON.toJson(line);
    synchronized (OUT) {
      OUT.print(text);
      OUT.print('\n');
      OUT.flush();
    }
  }

  /** The error event (one line, at most 3,900 characters) and the exit with `code`. */
  static void fail(String message, int code) {
    String line = String.valueOf(message).replaceAll("\\s+", " ");
    emit("error", "message", line.substring(0, Math.min(line.length(), 3900)));
    Runtime.getRuntime().halt(code);
  }

  static JsonObject config() throws java.io.IOException {
    String line = IN.readLine();
    if (line == null) {
      return null;
    }
    JsonObject config = JsonParser.parseString(line).getAsJsonObject();
    Thread reader = new Thread(Wire::readCommands, "commands");
    reader.setDaemon(true);
    reader.start();
    return config;
  }

  private static void readCommands() {
    try {
      for (String line = IN.readLine(); line != null; line = IN.readLine()) {
        if (!line.isBlank()) {
          COMMANDS.add(JsonParser.parseString(line).getAsJsonObject());
        }
      }
    } catch (Exception e) {
      System.err.println("stdin: " + e);
    }
    JsonObject stop = new JsonObject();
    stop.addProperty("cmd", "stop");
    COMMANDS.add(stop);
  }

  static JsonObject next() throws InterruptedException {
    return COMMANDS.take();
  }

  /** The next command within `ms`, or null. */
  static JsonObject poll(long ms) throws InterruptedException {
    return COMMANDS.poll(ms, java.util.concurrent.TimeUnit.MILLISECONDS);
  }
}
