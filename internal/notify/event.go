package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/runnerguard/runnerguard/internal/death"
)

// EventType is the CloudEvent's type.
const EventType = "io.runnerguard.runnerdeath.v1"

// EventSender posts the record as a structured CloudEvent, signed the
// Standard Webhooks way (webhook-id, webhook-timestamp, webhook-signature:
// "v1," and the base64 HMAC-SHA256 of "id.timestamp.body").
type EventSender struct {
	URL string
	// Key is the HMAC key, read from the Secret at each report: a
	// Standard Webhooks "whsec_" secret is base64 after its prefix; any
	// other value is the key's bytes.
	Key       func(ctx context.Context) ([]byte, error)
	Transport http.RoundTripper
	Now       func() time.Time
}

// EventData is the event's data: the record (its last words only where
// the sink opted in), what it means, and where to read the rest.
type EventData struct {
	Record  death.Record `json:"record"`
	Name    string       `json:"name"`
	Title   string       `json:"title"`
	Meaning string       `json:"meaning,omitempty"`
	Command string       `json:"command"`
}

// Event is the CloudEvent of a delivery. Its id is the record's UID, its
// source the record's collection: a receiver drops a repeat by the two.
func Event(d Delivery) cloudevents.Event {
	r := d.Shown()
	if !d.Target.LastWords {
		r.Message, r.MessageTruncated = "", false
	}
	e := cloudevents.NewEvent()
	e.SetID(d.ID)
	e.SetType(EventType)
	e.SetSource("/apis/runnerguard.io/v1alpha1/namespaces/" + url.PathEscape(r.Namespace) + "/runnerdeaths")
	e.SetSubject(d.Name)
	if r.FinishedAt != nil {
		e.SetTime(r.FinishedAt.Time)
	}
	_ = e.SetData(cloudevents.ApplicationJSON, EventData{Record: r, Name: d.Name, Title: Title(r), Meaning: meaning(r), Command: Command(r)})
	return e
}

// Find cannot ask a sink: a repeat carries the same id.
func (s *EventSender) Find(context.Context, Delivery) (string, bool, error) { return "", false, nil }

// Send posts the event.
func (s *EventSender) Send(ctx context.Context, d Delivery) (string, error) {
	key, err := s.Key(ctx)
	if err != nil {
		return "", err
	}
	base := s.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	sig := &signer{base: base, key: key, id: d.ID, now: s.Now}
	p, err := cehttp.New(cehttp.WithTarget(s.URL), cehttp.WithRoundTripper(sig))
	if err != nil {
		return "", err
	}
	c, err := cloudevents.NewClient(p)
	if err != nil {
		return "", err
	}
	res := c.Send(cloudevents.WithEncodingStructured(ctx), Event(d))
	if cloudevents.IsACK(res) {
		return s.URL, nil
	}
	err = fmt.Errorf("posting the event to %s: %w", s.URL, res)
	if sig.resp == nil {
		return "", &Failure{Err: err}
	}
	return "", failure(sig.resp, err, s.Now())
}

// signer signs each request's body and keeps the last response, whose
// Retry-After the SDK's result does not carry.
type signer struct {
	base http.RoundTripper
	key  []byte
	id   string
	now  func() time.Time
	resp *http.Response
}

func (s *signer) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		body = b
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	ts := strconv.FormatInt(s.now().Unix(), 10)
	r.Header.Set("webhook-id", s.id)
	r.Header.Set("webhook-timestamp", ts)
	r.Header.Set("webhook-signature", "v1,"+Sign(s.key, s.id, ts, body))
	resp, err := s.base.RoundTrip(r)
	s.resp = resp
	return resp, err
}

// Sign is the Standard Webhooks signature of a body.
func Sign(key []byte, id, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// HMACKey reads a Secret's value as a key.
func HMACKey(v []byte) ([]byte, error) {
	s := strings.TrimSpace(string(v))
	if rest, ok := strings.CutPrefix(s, "whsec_"); ok {
		k, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return nil, fmt.Errorf("a whsec_ key is base64 after its prefix: %w", err)
		}
		return k, nil
	}
	if s == "" {
		return nil, fmt.Errorf("the HMAC key is empty")
	}
	return []byte(s), nil
}
