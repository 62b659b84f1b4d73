package infrastructure

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"os"

	"github.com/pkg/errors"
	"k8s.io/client-go/rest"

	"github.com/dockyard-dev/dockyard/pkg/container/runtimes"
)

// An engine of an infrastructure cluster acts for one owner, "<management cluster ID>/<the
// DockyardCluster's namespace>": only what that owner made there is its own, and the first owner
// to make anything in a namespace of an infrastructure cluster holds it
// (docs/kubernetes-infrastructure.md). Every reconciler and the command line resolve a
// cluster's owner the same way, so the manager and `dockyard` act for the same one.

// unknownManagement names a management cluster nothing identifies.
const unknownManagement = "unknown"

// managementID names the management cluster engines act for: a short hash of its API server's
// CA certificates (the same whether they come as data or in a file, whatever address reaches the
// server: the manager's in-cluster configuration and a user's kubeconfig name the same cluster
// alike). Without a CA (the system's roots trust the server), the ID given, else a hash of the
// server's address; without a management cluster, the ID given, else "unknown". A CA file that
// cannot be read is an error: guessing another name would make the cluster's objects another
// owner's.
func managementID(cfg *rest.Config, given string) (string, error) {
	if cfg == nil {
		return cmp.Or(given, unknownManagement), nil
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		b, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return "", errors.Wrapf(err, "reading the management cluster's CA %s, which names it to infrastructure clusters", cfg.CAFile)
		}
		ca = b
	}
	if len(ca) == 0 {
		if given != "" {
			return given, nil
		}
		return shortHash([]byte("server " + cfg.Host)), nil
	}
	return shortHash(certificates(ca)), nil
}

// certificates are the DER bytes of the certificates in PEM data, in order; the data itself,
// trimmed, when it holds none.
func certificates(data []byte) []byte {
	var der []byte
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			der = append(der, b.Bytes...)
		}
	}
	if len(der) == 0 {
		return bytes.TrimSpace(data)
	}
	return der
}

// shortHash is 16 hexadecimal digits of the SHA-256 of b.
func shortHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ownerOf is the owner of a management cluster's namespace: "<id>/<namespace>", or, longer than
// runtimes.MaxOwnerLength, its beginning and a hash of the whole.
func ownerOf(id, namespace string) string {
	owner := id + "/" + namespace
	if len(owner) <= runtimes.MaxOwnerLength {
		return owner
	}
	hash := shortHash([]byte(owner))
	return owner[:runtimes.MaxOwnerLength-len(hash)-1] + "~" + hash
}
