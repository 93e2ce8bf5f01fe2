package tqb.dbscheduler;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;

/**
 * The run's database as db-scheduler takes it: a DataSource (HikariCP's pool, as its
 * README's examples use) of libpq's connection parts, with the run's schema as the
 * search_path, its application_name, and in a plan capture auto_explain's options, whose
 * notices (JDBC warnings on each statement) go out as `plan` events.
 */
final class Database {
  private Database() {}

  static DataSource open(JsonObject config, int connections) {
    JsonObject c = config.getAsJsonObject("connection");
    String host = text(c, "host");
    String port = text(c, "port") == null ? "5432" : text(c, "port");
    HikariConfig pool = new HikariConfig();
    boolean socket = host == null || host.startsWith("/");
    String address = socket ? "localhost" : (host.contains(":") ? "[" + host + "]" : host);
    pool.setJdbcUrl("jdbc:postgresql://" + address + ":" + port + "/" + text(c, "dbname"));
    pool.setUsername(text(c, "user"));
    pool.setPassword(text(c, "password"));
    pool.setMaximumPoolSize(connections);
    pool.setMinimumIdle(1);
    pool.setPoolName("dbscheduler-adapter");
    pool.addDataSourceProperty("currentSchema", config.get("schema").getAsString());
    pool.addDataSourceProperty("ApplicationName", text(c, "application_name"));
    if (socket) {
      String dir = host == null ? "/var/run/postgresql" : host;
      pool.addDataSourceProperty("socketFactory", UnixSockets.class.getName());
      pool.addDataSourceProperty("socketFactoryArg", dir + "/.s.PGSQL." + port);
      pool.addDataSourceProperty("sslmode", "disable");
    } else if (text(c, "sslmode") != null) {
      pool.addDataSourceProperty("sslmode", text(c, "sslmode"));
    }
    String options = joined(text(c, "options"), text(config, "explain_options"));
    if (!options.isEmpty()) {
      pool.addDataSourceProperty("options", options);
    }
    HikariDataSource source = new HikariDataSource(pool);
    return text(config, "explain_options") == null ? source : forwardingPlans(source);
  }

  static String text(JsonObject object, String name) {
    JsonElement value = object.get(name);
    return value == null || value.isJsonNull() ? null : value.getAsString();
  }

  private static String joined(String... parts) {
    List<String> given = new ArrayList<>();
    for (String part : parts) {
      if (part != null && !part.isBlank()) {
        given.add(part);
      }
    }
    return String.join(" ", given);
  }

  /** Each statement's warnings after it ran: auto_explain's plans, as `plan` events. */
  private static DataSource forwardingPlans(DataSource source) {
    return (DataSource)
        Proxy.newProxyInstance(
            Database.class.getClassLoader(),
            new Class<?>[] {DataSource.class, AutoCloseable.class},
            (proxy, method, args) -> {
              Object result = invoke(source, method, args);
              return result instanceof Connection ? wrap((Connection) result) : result;
            });
  }

  private static Connection wrap(Connection connection) {
    InvocationHandler handler =
        (proxy, method, args) -> {
          Object result = invoke(connection, method, args);
          if (result instanceof Statement) {
            return statement((Statement) result, method.getReturnType());
          }
          if (method.getName().equals("commit")) {
            forward(connection.getWarnings());
            connection.clearWarnings();
          }
          return result;
        };
    return (Connection)
        Proxy.newProxyInstance(
            Database.class.getClassLoader(), new Class<?>[] {Connection.class}, handler);
  }

  private static Object statement(Statement statement, Class<?> type) {
    InvocationHandler handler =
        (proxy, method, args) -> {
          Object result = invoke(statement, method, args);
          if (method.getName().startsWith("execute")) {
            forward(statement.getWarnings());
            statement.clearWarnings();
          }
          return result;
        };
    return Proxy.newProxyInstance(Database.class.getClassLoader(), new Class<?>[] {type}, handler);
  }

  private static void forward(SQLWarning warning) {
    for (SQLWarning w = warning; w != null; w = w.getNextWarning()) {
      String message = w.getMessage();
      if (message != null && message.startsWith("duration:")) {
        Wire.emit("plan", "message", message);
      }
    }
  }

  private static Object invoke(Object target, Method method, Object[] args) throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  static void close(DataSource source) {
    if (source instanceof AutoCloseable) {
      try {
        ((AutoCloseable) source).close();
      } catch (Exception e) {
        System.err.println("closing the pool: " + e);
      }
    }
  }
}
