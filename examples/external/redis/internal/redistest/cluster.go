package redistest

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of six redis-server processes on loopback:
// three masters with a replica each, made by redis-cli --cluster create.
type Cluster struct {
	t   testing.TB
	cli string
	// Nodes are the six servers, in the order they were started.
	Nodes []*Server
}

// clusterNodeTimeout is short so that a replica takes over from a killed
// master within a few seconds.
const clusterNodeTimeout = "1000"

// StartCluster starts a cluster for t and stops it when t ends, once
// every slot is served and every replica has caught up.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c := &Cluster{t: t, cli: lookPath(t, "redis-cli")}
	for range 6 {
		c.Nodes = append(c.Nodes, StartWith(t, Options{Args: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "{dir}/nodes.conf",
			"--cluster-node-timeout", clusterNodeTimeout,
			// The bus port would otherwise be the port plus 10000, which
			// nobody checked is free.
			"--cluster-port", "{port2}",
		}}))
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(c.cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.WaitHealthy()
	return c
}

// Addrs are the host:port addresses of every node, in start order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// CLI runs redis-cli against node n and returns its output.
func (c *Cluster) CLI(n *Server, args ...string) (string, error) {
	args = append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(n.Port())}, args...)
	out, err := exec.Command(c.cli, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("redis-cli %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// Node is one line of CLUSTER NODES.
type Node struct {
	// ID is the node's cluster id.
	ID string
	// Addr is where it listens, host:port.
	Addr string
	// Master reports whether it serves slots; Failed whether the
	// cluster marks it failed.
	Master bool
	Failed bool
}

// Topology returns CLUSTER NODES as a running node sees it.
func (c *Cluster) Topology() []Node {
	c.t.Helper()
	var lastErr error
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		out, err := c.CLI(n, "cluster", "nodes")
		if err != nil {
			lastErr = err
			continue
		}
		var nodes []Node
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) < 8 {
				continue
			}
			addr, _, _ := strings.Cut(f[1], "@")
			flags := "," + f[2] + ","
			nodes = append(nodes, Node{
				ID:     f[0],
				Addr:   addr,
				Master: strings.Contains(flags, ",master,"),
				Failed: strings.Contains(flags, ",fail,") || strings.Contains(flags, ",fail?,"),
			})
		}
		return nodes
	}
	c.t.Fatalf("no node answers CLUSTER NODES: %v", lastErr)
	return nil
}

// Masters returns the running nodes that are masters now.
func (c *Cluster) Masters() []*Server {
	c.t.Helper()
	var masters []*Server
	for _, nd := range c.Topology() {
		if !nd.Master || nd.Failed {
			continue
		}
		if s := c.node(nd.Addr); s != nil && s.Running() {
			masters = append(masters, s)
		}
	}
	return masters
}

// ID returns the cluster node id of n.
func (c *Cluster) ID(n *Server) string {
	c.t.Helper()
	id, err := c.CLI(n, "cluster", "myid")
	if err != nil {
		c.t.Fatal(err)
	}
	return id
}

func (c *Cluster) node(addr string) *Server {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// WaitHealthy waits, for at most 30 seconds, until every running node sees
// the cluster as ok with every slot served and three masters up, and
// every master's replicas have all it wrote.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.healthy()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not healthy after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *Cluster) healthy() error {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		info, err := c.CLI(n, "cluster", "info")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
			return fmt.Errorf("node %s: %s", n.Addr(), info)
		}
		repl, err := c.CLI(n, "info", "replication")
		if err != nil {
			return err
		}
		if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
			return fmt.Errorf("replica %s not linked to its master", n.Addr())
		}
		if strings.Contains(repl, "role:master") {
			offset := field(repl, "master_repl_offset")
			for line := range strings.Lines(repl) {
				// slave0:ip=127.0.0.1,port=1234,state=online,offset=42,lag=0
				if strings.HasPrefix(line, "slave") && strings.Contains(line, "offset=") {
					if !strings.Contains(line, "state=online") || !strings.Contains(line, "offset="+offset+",") {
						return fmt.Errorf("master %s: replica behind: %s (master at %s)", n.Addr(), strings.TrimSpace(line), offset)
					}
				}
			}
		}
	}
	if m := len(c.Masters()); m != 3 {
		return fmt.Errorf("%d masters up, want 3", m)
	}
	return nil
}

// field returns the value of "name:value" in INFO output.
func field(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// Reshard moves n slots from one master to another with redis-cli
// --cluster reshard, which migrates their keys with MIGRATE while clients
// keep using them (they see ASK and, once a slot is moved, MOVED).
func (c *Cluster) Reshard(from, to *Server, n int) error {
	c.t.Helper()
	_, err := c.CLI(from, "--cluster", "reshard", from.Addr(),
		"--cluster-from", c.ID(from), "--cluster-to", c.ID(to),
		"--cluster-slots", strconv.Itoa(n), "--cluster-yes")
	return err
}
