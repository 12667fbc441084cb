package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ca signs every certificate of the cluster: the API server's serving
// certificate and the clients' certificates (whose CN is the username and
// whose O are the groups).
type ca struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA() (*ca, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "runnerguard-e2e-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &ca{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue returns a PEM certificate and key for cn/orgs, valid for the given
// names and IPs when it is a serving certificate.
func (c *ca) issue(cn string, orgs []string, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if len(dnsNames)+len(ips) > 0 {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// client is one identity that talks to the API server.
type client struct {
	name   string // file name of its kubeconfig
	user   string
	groups []string
}

// clients are the cluster's own components plus the admin (tests, kubectl,
// helm and cert-manager, which runs on the host, not as a pod).
var clients = []client{
	{"admin", "runnerguard-e2e-admin", []string{"system:masters"}},
	{"kubelet", "system:node:" + nodeName, []string{"system:nodes"}},
	{"controller-manager", "system:kube-controller-manager", nil},
	{"scheduler", "system:kube-scheduler", nil},
	{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}},
}

// writePKI writes the CA, the API server's certificate, the service
// account signing key and one kubeconfig per client into dir.
func writePKI(dir string) error {
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	authority, err := newCA()
	if err != nil {
		return err
	}
	caKey, err := x509.MarshalECPrivateKey(authority.key)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"ca.crt": authority.pem,
		"ca.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: caKey}),
	}
	// The service IP of "kubernetes" is the API server's own address here
	// (see network.go), so one certificate serves pods and the host.
	crt, key, err := authority.issue("kube-apiserver", nil,
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		[]net.IP{net.ParseIP(apiserverIP), net.ParseIP("127.0.0.1")})
	if err != nil {
		return err
	}
	files["apiserver.crt"], files["apiserver.key"] = crt, key
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	files["sa.key"] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER})
	files["sa.pub"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})
	for _, c := range clients {
		crt, key, err := authority.issue(c.user, c.groups, nil, nil)
		if err != nil {
			return err
		}
		files[c.name+".crt"], files[c.name+".key"] = crt, key
		if err := writeKubeconfig(filepath.Join(dir, c.name+".kubeconfig"), authority.pem, crt, key); err != nil {
			return err
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(pki, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func writeKubeconfig(path string, caPEM, crt, key []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: apiserverURL(), CertificateAuthorityData: caPEM}
	cfg.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e", Namespace: "default"}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
