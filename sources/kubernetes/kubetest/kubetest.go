package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Service CIDRs of the test control plane. The first is the range of the
// Kubernetes DNS specification's examples, so default/kubernetes gets
// 10.3.0.1 as in the specification.
const (
	ServiceCIDR4 = "10.3.0.0/16"
	ServiceCIDR6 = "2001:db8::/112"
)

// EnvBinary names the kube-apiserver binary; scripts/k8s-tools.sh prints
// it.
const EnvBinary = "DNSD_KUBE_APISERVER"

// Binary returns the kube-apiserver to run: $DNSD_KUBE_APISERVER, else the
// newest one scripts/k8s-tools.sh cached, else "".
func Binary() string {
	if p := os.Getenv(EnvBinary); p != "" {
		return p
	}
	cache := os.Getenv("DNSD_TOOLS_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache", "dnsd")
	}
	found, _ := filepath.Glob(filepath.Join(cache, "k8s", "*", "kube-apiserver"))
	sort.Strings(found)
	if len(found) == 0 {
		return ""
	}
	return found[len(found)-1]
}

// Require returns the kube-apiserver binary. Without one the test is
// skipped, or fails when CI=true (in CI these tests always run).
func Require(t testing.TB) string {
	t.Helper()
	bin := Binary()
	if bin != "" {
		if st, err := os.Stat(bin); err == nil && !st.IsDir() {
			return bin
		}
	}
	msg := "no kube-apiserver binary: run scripts/k8s-tools.sh (or set " + EnvBinary + ")"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// StartFor starts a control plane in a temporary directory of t and stops
// it when t ends; without the kube-apiserver binary t is skipped (or
// fails when CI=true, see Require).
func StartFor(t testing.TB) *ControlPlane {
	t.Helper()
	cp, err := Start(Require(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Close)
	return cp
}

// Each calls fn(i) for every i in [0, n) from 16 goroutines (API servers
// take objects faster in parallel) and returns the first error; the other
// calls still run.
func Each(n int, fn func(i int) error) error {
	work := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

// ControlPlane is an etcd (in this process) and a kube-apiserver
// (a child process) on loopback ports.
type ControlPlane struct {
	Dir        string               // always set
	Kubeconfig string               // a kubeconfig file with context "test"; always set
	URL        string               // always set
	Token      string               // always set
	CAFile     string               // always set
	Config     *rest.Config         // always set
	Client     kubernetes.Interface // always set

	etcd    *embed.Etcd
	etcdURL string
	etcdDir string // the data directory
	peerURL string
	bin     string
	args    []string
	log     *os.File

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts etcd and the kube-apiserver bin in dir and waits until the
// API server is ready.
func Start(bin, dir string) (*ControlPlane, error) {
	cp := &ControlPlane{Dir: dir, bin: bin, Token: "dnsd-test-token"}
	if err := cp.startEtcd(); err != nil {
		return nil, err
	}
	if err := cp.prepare(); err != nil {
		cp.Close()
		return nil, err
	}
	if err := cp.StartAPIServer(); err != nil {
		cp.Close()
		return nil, err
	}
	return cp, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (cp *ControlPlane) startEtcd() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	cp.etcdDir = filepath.Join(cp.Dir, "etcd")
	cp.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	cp.peerURL = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	return cp.runEtcd()
}

// runEtcd starts etcd on its data directory and URLs.
func (cp *ControlPlane) runEtcd() error {
	cfg := embed.NewConfig()
	cfg.Dir = cp.etcdDir
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cu, _ := url.Parse(cp.etcdURL)
	pu, _ := url.Parse(cp.peerURL)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	var e *embed.Etcd
	var err error
	for try := 0; ; try++ {
		e, err = embed.StartEtcd(cfg)
		if err == nil || try == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond) // the old listener may not be released yet
	}
	if err != nil {
		return fmt.Errorf("etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return errors.New("etcd: not ready after 30s")
	}
	cp.etcd = e
	return nil
}

// ReplaceEtcd stops the API server and etcd, starts an etcd with an empty
// data directory at the same address (its revisions start again from 1,
// as after restoring an older snapshot) and the API server again, which
// creates its default objects anew.
func (cp *ControlPlane) ReplaceEtcd() error {
	cp.StopAPIServer()
	cp.etcd.Close()
	<-cp.etcd.Server.StopNotify()
	cp.etcd = nil
	cp.etcdDir = filepath.Join(cp.Dir, fmt.Sprintf("etcd-%d", time.Now().UnixNano()))
	if err := cp.runEtcd(); err != nil {
		return err
	}
	return cp.StartAPIServer()
}

// prepare writes the keys, token file and kubeconfig and fixes the
// API server's command line.
func (cp *ControlPlane) prepare() error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	port := ports[0]
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	saKey := filepath.Join(cp.Dir, "sa.key")
	if err := os.WriteFile(saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return err
	}
	tokens := filepath.Join(cp.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(cp.Token+",admin,admin,\"system:masters\"\n"), 0o600); err != nil {
		return err
	}
	certDir := filepath.Join(cp.Dir, "certs")
	cp.CAFile = filepath.Join(certDir, "apiserver.crt")
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	cp.args = []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--token-auth-file=" + tokens,
		// RBAC as in a real cluster: the test token's user is in
		// system:masters (all rights); other identities get only what
		// their bindings grant (see KubeconfigFor).
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=" + ServiceCIDR4 + "," + ServiceCIDR6,
		"--disable-admission-plugins=ServiceAccount",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--v=0",
	}
	cp.Kubeconfig, err = cp.KubeconfigFor("admin", cp.Token)
	if err != nil {
		return err
	}
	cp.Config = &rest.Config{
		Host:            cp.URL,
		BearerToken:     cp.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile},
		QPS:             200,
		Burst:           400,
	}
	cp.log, err = os.OpenFile(filepath.Join(cp.Dir, "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	return err
}

// KubeconfigFor writes a kubeconfig file (context "test") that
// authenticates to the API server with a bearer token, such as a service
// account's, and returns its path.
func (cp *ControlPlane) KubeconfigFor(user, token string) (string, error) {
	path := filepath.Join(cp.Dir, "kubeconfig")
	if user != "admin" {
		path += "-" + user
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: test
  context: {cluster: test, user: %[3]s}
current-context: test
`, cp.URL, cp.CAFile, user, token)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// StartAPIServer (re)starts the kube-apiserver on its port and waits
// until it is ready.
func (cp *ControlPlane) StartAPIServer() error {
	cp.mu.Lock()
	if cp.cmd != nil {
		cp.mu.Unlock()
		return errors.New("kube-apiserver already running")
	}
	cmd := exec.Command(cp.bin, cp.args...)
	cmd.Stdout, cmd.Stderr = cp.log, cp.log
	// Never outlive the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		cp.mu.Unlock()
		return fmt.Errorf("kube-apiserver: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	cp.cmd, cp.done = cmd, done
	cp.mu.Unlock()

	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("kube-apiserver exited at start:\n%s", cp.LogTail(40))
		default:
		}
		if err := cp.ready(); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready after 90s: %v\n%s", err, cp.LogTail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cp.Client == nil {
		c, err := kubernetes.NewForConfig(cp.Config)
		if err != nil {
			return err
		}
		cp.Client = c
	}
	return nil
}

func (cp *ControlPlane) ready() error {
	if _, err := os.Stat(cp.CAFile); err != nil {
		return err
	}
	c, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("%v: %s", err, body)
	}
	// The default/kubernetes service is created shortly after readiness.
	if _, err := c.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil {
		return err
	}
	return nil
}

// StopAPIServer stops the kube-apiserver (SIGTERM, then SIGKILL after
// 10s); etcd keeps the data for StartAPIServer.
func (cp *ControlPlane) StopAPIServer() {
	cp.mu.Lock()
	cmd, done := cp.cmd, cp.done
	cp.cmd = nil
	cp.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// LogTail returns the last n lines of the API server's log.
func (cp *ControlPlane) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(cp.Dir, "kube-apiserver.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Close stops everything. The directory is the caller's.
func (cp *ControlPlane) Close() {
	cp.StopAPIServer()
	if cp.etcd != nil {
		cp.etcd.Close()
		cp.etcd = nil
	}
	if cp.log != nil {
		cp.log.Close()
	}
}
