package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ZooKeeper is one ZooKeeper server (3.5+, for container nodes): standalone,
// or member ID of the ensemble whose members are Peers.
type ZooKeeper struct {
	Dir   string // conf/ and data/ go here
	Port  int    // its client port, on loopback
	ID    int    // its myid in an ensemble (1-based); 0 when standalone
	Peers []ZKPeer
}

// ZKPeer is an ensemble member's quorum and leader-election ports.
type ZKPeer struct{ Quorum, Election int }

// ZKClasspath finds ZooKeeper's jars: ZK_CLASSPATH, else Debian's. Debian's
// zookeeper.jar names its dependencies in its manifest but no slf4j binding,
// so slf4j-simple (from libslf4j-java, a dependency) is added when present:
// without it the server logs nothing at all.
func ZKClasspath() string {
	if cp := os.Getenv("ZK_CLASSPATH"); cp != "" {
		return cp
	}
	const jar, log = "/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"
	if _, err := os.Stat(jar); err != nil {
		return ""
	}
	if _, err := os.Stat(log); err == nil {
		return jar + ":" + log
	}
	return jar
}

// Cmd writes the server's configuration (afresh on every start) and returns
// the command that runs it in the foreground, logging to its stdout.
func (z ZooKeeper) Cmd() (*exec.Cmd, error) {
	cp := ZKClasspath()
	java, err := look("java", "zookeeper")
	if err != nil || cp == "" {
		return nil, errors.Join(errors.New("ZooKeeper's jars not found (Debian package zookeeper, or set ZK_CLASSPATH)"), err)
	}
	conf, data := filepath.Join(z.Dir, "conf"), filepath.Join(z.Dir, "data")
	if err := errors.Join(os.MkdirAll(conf, 0o755), os.MkdirAll(data, 0o755)); err != nil {
		return nil, err
	}
	files := map[string]string{filepath.Join(conf, "zoo.cfg"): z.config(data),
		filepath.Join(conf, "log4j.properties"): zkLog4j, filepath.Join(conf, "logback.xml"): zkLogback}
	if z.ID > 0 {
		files[filepath.Join(data, "myid")] = strconv.Itoa(z.ID)
	}
	if err := writeFiles(files); err != nil {
		return nil, err
	}
	cmd := exec.Command(java, "-Xms32m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.net.preferIPv4Stack=true",
		"-Dzookeeper.log.dir="+z.Dir, "-Dzookeeper.root.logger=INFO,CONSOLE",
		"-Dlog4j.configuration=file:"+filepath.Join(conf, "log4j.properties"),
		"-Dlogback.configurationFile="+filepath.Join(conf, "logback.xml"),
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS",
		"-Dzookeeper.admin.enableServer=false", "-Dzookeeper.forceSync=no", "-Dznode.container.checkIntervalMs=1000",
		"-cp", conf+":"+cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", z.ConfigFile())
	cmd.Dir = z.Dir
	return cmd, nil
}

// ConfigFile is the server's zoo.cfg, which its command line names.
func (z ZooKeeper) ConfigFile() string { return filepath.Join(z.Dir, "conf", "zoo.cfg") }

func (z ZooKeeper) config(data string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# written by internal/servers (afresh on every start)
tickTime=500
initLimit=10
syncLimit=5
dataDir=%s
clientPortAddress=127.0.0.1
clientPort=%d
# tests open many sessions from 127.0.0.1; the default cap is 60
maxClientCnxns=0
minSessionTimeout=1000
maxSessionTimeout=120000
4lw.commands.whitelist=ruok,stat,srvr,mntr,conf,cons,dump,wchs
# the admin server would take port 8080
admin.enableServer=false
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
`, data, z.Port)
	for i, p := range z.Peers {
		fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", i+1, p.Quorum, p.Election)
	}
	return b.String()
}

// Console logging for Debian's jars (slf4j-simple, set by the -D flags) or
// for upstream releases given through ZK_CLASSPATH: logback (3.8+) or log4j
// 1.2 (3.5–3.7).
const zkLog4j = `log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
`

const zkLogback = `<configuration>
  <appender name="CONSOLE" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{ISO8601} %-5level [%thread:%logger{0}@%line] - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="CONSOLE"/></root>
</configuration>
`

// Answers is nil when the server serves: standalone, or in a quorum.
func (z ZooKeeper) Answers(ctx context.Context) error {
	if mode := ZKMode(ctx, Addr(z.Port)); mode == "" {
		return fmt.Errorf("zookeeper on %s does not serve", Addr(z.Port))
	}
	return nil
}

// ZKMode is what the server at addr says it is (standalone, leader,
// follower), or "" when it does not serve.
func ZKMode(ctx context.Context, addr string) string {
	for _, line := range strings.Split(srvr(ctx, addr), "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// srvr sends ZooKeeper's srvr four-letter word to addr and returns the reply.
func srvr(ctx context.Context, addr string) string {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return ""
	}
	defer c.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(2 * time.Second)
	}
	_ = c.SetDeadline(deadline)
	if _, err := c.Write([]byte("srvr")); err != nil {
		return ""
	}
	var b strings.Builder
	buf := make([]byte, 1024)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}
