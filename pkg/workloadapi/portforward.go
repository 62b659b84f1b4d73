package workloadapi

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// portForwardProtocol is the port-forward protocol served (client-go's
// portforward.PortForwardProtocolV1Name).
const portForwardProtocol = "portforward.k8s.io"

// Forwarder connects to a port of a Pod of the simulated cluster: what is behind it (an etcd
// member for etcd's Pods) is the cluster's to say. An error is reported on the port-forward's
// error stream.
type Forwarder func(namespace, pod string, port int) (net.Conn, error)

// portForward serves a Pod's portforward subresource over SPDY, as the kubelet does behind
// kube-apiserver: one data stream per forwarded connection, paired with an error stream.
// WebSocket tunnelling is answered with an upgrade failure, on which client-go falls back to
// SPDY.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request, req *request) {
	if s.forward == nil {
		writeError(w, apierrors.NewNotFound(req.GroupResource(), req.name+"/portforward"))
		return
	}
	if _, err := s.store.Get(req.GroupResource(), req.namespace, req.name); err != nil {
		writeError(w, err)
		return
	}
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		writeError(w, apierrors.NewBadRequest("port-forward is served over SPDY, not WebSocket"))
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{portForwardProtocol}); err != nil {
		return // Handshake answered
	}
	streams := make(chan httpstream.Stream, 4)
	conn := spdy.NewResponseUpgraderWithPings(30*time.Second).UpgradeResponse(w, r, func(st httpstream.Stream, _ <-chan struct{}) error {
		streams <- st
		return nil
	})
	if conn == nil {
		return // the upgrader answered
	}
	defer func() { _ = conn.Close() }()
	conn.SetIdleTimeout(10 * time.Minute)
	errorStreams := map[string]httpstream.Stream{}
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-conn.CloseChan():
			return
		case st := <-streams:
			id := st.Headers().Get(corev1.PortForwardRequestIDHeader)
			switch st.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				errorStreams[id] = st
			case corev1.StreamTypeData:
				errStream := errorStreams[id]
				delete(errorStreams, id)
				wg.Add(1)
				go func() {
					defer wg.Done()
					s.forwardStream(req, st, errStream)
				}()
			default:
				_ = st.Reset()
			}
		}
	}
}

// forwardStream copies one data stream to and from the Pod's port until either side ends.
func (s *Server) forwardStream(req *request, data, errStream httpstream.Stream) {
	defer data.Close()
	fail := func(msg string) {
		if errStream != nil {
			_, _ = io.WriteString(errStream, msg)
			_ = errStream.Close()
		}
	}
	port, err := strconv.Atoi(data.Headers().Get(corev1.PortHeader))
	if err != nil {
		fail("port " + data.Headers().Get(corev1.PortHeader) + ": not a port")
		return
	}
	target, err := s.forward(req.namespace, req.name, port)
	if err != nil {
		fail("forwarding to port " + strconv.Itoa(port) + " of Pod " + req.namespace + "/" + req.name + ": " + err.Error())
		return
	}
	defer func() { _ = target.Close() }()
	if errStream != nil {
		_ = errStream.Close()
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(target, data); done <- struct{}{} }()
	go func() { _, _ = io.Copy(data, target); done <- struct{}{} }()
	<-done
}
