/*
Copyright The trainjob-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command rendezvous is the program test/e2e-real runs in real Pods on the
// real node, in place of a training program: it does what torchrun does
// with the environment this controller gives a torch TrainJob's Pods
// before any training. Rank 0 (PET_NODE_RANK) listens on PET_MASTER_PORT;
// every other rank resolves PET_MASTER_ADDR (the headless Service's name
// of rank 0's Pod) through the cluster's DNS, connects over TCP and sends
// its rank; rank 0 answers each with the sum of all ranks once all
// PET_NNODES have arrived, and every rank checks that sum. With
// RENDEZVOUS_HOST_CHECK=1, rank 0 also waits for one connection from this
// machine (the test), which proves the Pod reachable from it. Rank 0 then
// reports its progress to the status server, with Kubeflow Trainer's
// protocol (the Kubeflow SDK's update_trainjob_status): a POST to
// KUBEFLOW_TRAINER_SERVER_URL with the token of KUBEFLOW_TRAINER_SERVER_TOKEN,
// verifying the server by KUBEFLOW_TRAINER_SERVER_CA_CERT. Each step is
// logged; a failure exits 1.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// deadline bounds the whole rendezvous, as torchrun's rendezvous timeout.
const deadline = 2 * time.Minute

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rendezvous: FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("rendezvous: OK")
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	rank, err := envInt("PET_NODE_RANK")
	if err != nil {
		return err
	}
	nnodes, err := envInt("PET_NNODES")
	if err != nil {
		return err
	}
	master, port := os.Getenv("PET_MASTER_ADDR"), os.Getenv("PET_MASTER_PORT")
	if master == "" || port == "" {
		return errors.New("PET_MASTER_ADDR and PET_MASTER_PORT must be set")
	}
	hostname, _ := os.Hostname()
	fmt.Printf("rendezvous: rank %d of %d on %s (addresses %s), master %s:%s\n", rank, nnodes, hostname, addresses(), master, port)
	if rank == 0 {
		if err := serve(ctx, nnodes, port, os.Getenv("RENDEZVOUS_HOST_CHECK") == "1"); err != nil {
			return err
		}
		// Halfway, then done: a status write each, the reports being
		// more than the status server's write interval (5 s) apart.
		if err := report(ctx, 50, 6, nnodes); err != nil {
			return err
		}
		time.Sleep(6 * time.Second)
		return report(ctx, 100, 0, nnodes)
	}
	return join(ctx, rank, nnodes, net.JoinHostPort(master, port))
}

// serve is rank 0: it gathers the other ranks' (and the host's) hellos,
// then answers each rank with the sum of the ranks.
func serve(ctx context.Context, nnodes int, port string, hostCheck bool) error {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	defer func() { _ = l.Close() }()
	if d, ok := ctx.Deadline(); ok {
		_ = l.(*net.TCPListener).SetDeadline(d)
	}
	var peers []net.Conn
	sum, hostSeen := 0, !hostCheck
	for len(peers) < nnodes-1 || !hostSeen {
		c, err := l.Accept()
		if err != nil {
			return fmt.Errorf("waiting for %d ranks (have %d) and the host (%t): %w", nnodes-1, len(peers), hostSeen, err)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			_ = c.Close()
			continue
		}
		hello := strings.Fields(line)
		switch {
		case len(hello) == 2 && hello[0] == "host":
			fmt.Printf("rendezvous: the host reached rank 0 from %s\n", c.RemoteAddr())
			_, _ = fmt.Fprintln(c, "ok")
			_ = c.Close()
			hostSeen = true
		case len(hello) == 2 && hello[0] == "rank":
			r, err := strconv.Atoi(hello[1])
			if err != nil || r <= 0 || r >= nnodes {
				return fmt.Errorf("a peer at %s sent %q", c.RemoteAddr(), line)
			}
			fmt.Printf("rendezvous: rank %d joined from %s\n", r, c.RemoteAddr())
			sum += r
			peers = append(peers, c)
		default:
			_ = c.Close()
		}
	}
	for _, c := range peers {
		if _, err := fmt.Fprintf(c, "sum %d\n", sum); err != nil {
			return err
		}
		_ = c.Close()
	}
	return check(sum, nnodes)
}

// join is every other rank: it resolves and connects to rank 0, retrying
// until the name resolves and rank 0 listens (Pods start in any order),
// and checks the sum it answers.
func join(ctx context.Context, rank, nnodes int, addr string) error {
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			fmt.Printf("rendezvous: connected to %s (%s)\n", addr, c.RemoteAddr())
			if d, ok := ctx.Deadline(); ok {
				_ = c.SetDeadline(d)
			}
			if _, err := fmt.Fprintf(c, "rank %d\n", rank); err != nil {
				return err
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			_ = c.Close()
			if err != nil {
				return fmt.Errorf("reading rank 0's answer: %w", err)
			}
			var sum int
			if _, err := fmt.Sscanf(line, "sum %d", &sum); err != nil {
				return fmt.Errorf("rank 0 answered %q", line)
			}
			return check(sum, nnodes)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("connecting to %s: %w", addr, err)
		}
		fmt.Printf("rendezvous: %s not reachable yet: %v\n", addr, err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// check compares the sum of the ranks with what it must be.
func check(sum, nnodes int) error {
	if want := nnodes * (nnodes - 1) / 2; sum != want {
		return fmt.Errorf("the ranks sum to %d, want %d", sum, want)
	}
	fmt.Printf("rendezvous: the %d ranks sum to %d\n", nnodes, sum)
	return nil
}

// report posts rank 0's progress, with the number of ranks as a metric,
// as a training program reports with the Kubeflow SDK.
func report(ctx context.Context, percent, remainingSeconds, nnodes int) error {
	url := os.Getenv("KUBEFLOW_TRAINER_SERVER_URL")
	if url == "" {
		return errors.New("KUBEFLOW_TRAINER_SERVER_URL is not set: the Pod was given no status server")
	}
	token, err := os.ReadFile(os.Getenv("KUBEFLOW_TRAINER_SERVER_TOKEN"))
	if err != nil {
		return fmt.Errorf("the status server token: %w", err)
	}
	ca, err := os.ReadFile(os.Getenv("KUBEFLOW_TRAINER_SERVER_CA_CERT"))
	if err != nil {
		return fmt.Errorf("the status server CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return errors.New("the status server CA is not a PEM certificate")
	}
	body := fmt.Sprintf(`{"trainerStatus":{"progressPercentage":%d,"estimatedRemainingSeconds":%d,"metrics":[{"name":"ranks","value":"%d"}],"lastUpdatedTime":%q}}`,
		percent, remainingSeconds, nnodes, time.Now().UTC().Format(time.RFC3339))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("reporting progress to %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reporting progress to %s: %s %s", url, resp.Status, answer)
	}
	fmt.Printf("rendezvous: reported progress %d%% to %s\n", percent, url)
	return nil
}

func envInt(name string) (int, error) {
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, os.Getenv(name), err)
	}
	return v, nil
}

// addresses are the Pod's IPv4 addresses but loopback.
func addresses() string {
	addrs, _ := net.InterfaceAddrs()
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return strings.Join(out, ",")
}
