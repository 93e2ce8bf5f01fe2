package tqb.dbscheduler;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** The named blocks of dbscheduler.sql (`-- name: <block>`), as the harness reads them. */
final class SqlBlocks {
  private static final Pattern HEADER = Pattern.compile("^--\\s*name:\\s*([a-z_][a-z0-9_]*)\\s*$");
  private final Map<String, String> blocks = new HashMap<>();

  SqlBlocks(Path file) throws IOException {
    String name = null;
    StringBuilder text = new StringBuilder();
    boolean inDoc = false;
    for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
      Matcher header = HEADER.matcher(line);
      if (header.matches()) {
        keep(name, text);
        name = header.group(1);
        text.setLength(0);
        inDoc = true;
      } else if (inDoc && line.startsWith("--")) {
        continue; // the block's documentation
      } else {
        inDoc = false;
        text.append(line).append('\n');
      }
    }
    keep(name, text);
  }

  private void keep(String name, StringBuilder text) {
    if (name != null) {
      blocks.put(name, text.toString().strip());
    }
  }

  String get(String name) {
    String sql = blocks.get(name);
    if (sql == null) {
      throw new IllegalStateException("dbscheduler.sql has no block " + name);
    }
    return sql;
  }
}
