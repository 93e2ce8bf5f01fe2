package tqb.dbscheduler;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.SocketImpl;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import javax.net.SocketFactory;

/**
 * PostgreSQL's unix socket for the JDBC driver, which speaks TCP alone: its socketFactory
 * (socketFactoryArg: the socket's path, `<dir>/.s.PGSQL.<port>`), on Java's own unix
 * domain channels (Java 16+). The harness's embedded server listens on its socket only.
 */
public final class UnixSockets extends SocketFactory {
  private final Path path;

  public UnixSockets(String path) {
    this.path = Path.of(path);
  }

  @Override
  public Socket createSocket() throws IOException {
    return new UnixSocket(path);
  }

  @Override
  public Socket createSocket(String host, int port) throws IOException {
    return createSocket();
  }

  @Override
  public Socket createSocket(String host, int port, java.net.InetAddress local, int localPort)
      throws IOException {
    return createSocket();
  }

  @Override
  public Socket createSocket(java.net.InetAddress host, int port) throws IOException {
    return createSocket();
  }

  @Override
  public Socket createSocket(
      java.net.InetAddress host, int port, java.net.InetAddress local, int localPort)
      throws IOException {
    return createSocket();
  }

  /** A connected channel in a Socket's clothes: what the driver calls of one, no more. */
  private static final class UnixSocket extends Socket {
    private final SocketChannel channel;
    private final InputStream in;
    private final OutputStream out;
    private int timeout;

    UnixSocket(Path path) throws IOException {
      super((SocketImpl) null);
      channel = SocketChannel.open(StandardProtocolFamily.UNIX);
      channel.connect(UnixDomainSocketAddress.of(path));
      in = Channels.newInputStream(channel);
      out = Channels.newOutputStream(channel);
    }

    @Override
    public void connect(SocketAddress endpoint) {}

    @Override
    public void connect(SocketAddress endpoint, int timeout) {}

    @Override
    public boolean isConnected() {
      return channel.isConnected();
    }

    @Override
    public boolean isClosed() {
      return !channel.isOpen();
    }

    @Override
    public InputStream getInputStream() {
      return in;
    }

    @Override
    public OutputStream getOutputStream() {
      return out;
    }

    @Override
    public synchronized void close() throws IOException {
      channel.close();
    }

    @Override
    public void shutdownInput() throws IOException {
      channel.shutdownInput();
    }

    @Override
    public void shutdownOutput() throws IOException {
      channel.shutdownOutput();
    }

    // Reads block (the driver's default socketTimeout, 0, is no timeout): kept, not used.
    @Override
    public synchronized void setSoTimeout(int timeout) {
      this.timeout = timeout;
    }

    @Override
    public synchronized int getSoTimeout() {
      return timeout;
    }

    @Override
    public void setTcpNoDelay(boolean on) {}

    @Override
    public boolean getTcpNoDelay() {
      return true;
    }

    @Override
    public void setKeepAlive(boolean on) {}

    @Override
    public boolean getKeepAlive() {
      return false;
    }

    @Override
    public synchronized void setSendBufferSize(int size) {}

    @Override
    public synchronized int getSendBufferSize() {
      return 65536;
    }

    @Override
    public synchronized void setReceiveBufferSize(int size) {}

    @Override
    public synchronized int getReceiveBufferSize() {
      return 65536;
    }
  }
}
