package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/mcruntime/multicluster-runtime/internal/redact"
	"github.com/mcruntime/multicluster-runtime/pkg/fleet"
)

// DefaultPath is the path the Multi-Cluster Manager serves the endpoint at.
const DefaultPath = "/clusters"

// Defaults of Options.
const (
	DefaultLimit = 500
	MaxLimit     = 5000
)

// Lister lists the clusters of a fleet; *fleet.Engine is one.
type Lister interface {
	List(opts fleet.ListOptions) (page []fleet.ClusterStatus, total int, more bool)
}

var _ Lister = &fleet.Engine{}

// Options configure a Handler. The zero value uses the defaults.
type Options struct {
	// DefaultLimit is the page size of a query without limit. Default
	// DefaultLimit (500).
	DefaultLimit int
	// MaxLimit is the largest limit a query may ask for. Default MaxLimit
	// (5000): a page of 5,000 clusters is about 1.5 MB of JSON.
	MaxLimit int
}

// List is the JSON document the endpoint serves.
type List struct {
	// Kind is "ClusterStatusList".
	Kind string `json:"kind"`
	// Total counts the clusters the query's state filter selects, on every
	// page.
	Total int `json:"total"`
	// Continue, if set, is the value of continue that asks for the next page.
	Continue string `json:"continue,omitempty"`
	// Clusters are this page's, sorted by name.
	Clusters []Cluster `json:"clusters"`
}

// Cluster is one cluster of the document.
type Cluster struct {
	Name string `json:"name"`
	// State is fleet.State: wanted, admitted, starting, engaged or
	// disconnected.
	State string `json:"state"`
	// Since is when the cluster entered its state on this replica.
	Since *time.Time `json:"since,omitempty"`
	// Paused: its requests are held until it is resumed.
	Paused bool `json:"paused"`
	// OwnedHere: this replica runs the cluster (always, without sharding).
	OwnedHere bool `json:"ownedHere"`
	// Owner is the replica sharding assigns the cluster to, when known.
	Owner string `json:"owner,omitempty"`
	// LastProbe is the last health probe's answer, if the cluster was probed.
	LastProbe *Probe `json:"lastProbe,omitempty"`
	// LastError is the last failed probe's or start's error, redacted, and
	// without the file paths of the controller's machine it may name;
	// LastErrorTime is when it happened (kept after a recovery).
	LastError     string     `json:"lastError,omitempty"`
	LastErrorTime *time.Time `json:"lastErrorTime,omitempty"`
}

// Probe is a health probe's answer.
type Probe struct {
	Time time.Time `json:"time"`
	// Result is ok, failed or unauthorized.
	Result         string  `json:"result"`
	LatencySeconds float64 `json:"latencySeconds"`
}

// Handler serves the status endpoint.
type Handler struct {
	lister Lister
	opts   Options
}

var _ http.Handler = &Handler{}

// NewHandler returns the status endpoint of the clusters l lists.
func NewHandler(l Lister, opts Options) *Handler {
	if opts.MaxLimit <= 0 {
		opts.MaxLimit = MaxLimit
	}
	if opts.DefaultLimit <= 0 {
		opts.DefaultLimit = min(DefaultLimit, opts.MaxLimit)
	}
	return &Handler{lister: l, opts: opts}
}

// query is a parsed request.
type query struct {
	list fleet.ListOptions
	text bool
}

// parse reads the request's query; its error is the 400's message.
func (h *Handler) parse(r *http.Request) (query, error) {
	q := query{list: fleet.ListOptions{Limit: h.opts.DefaultLimit}}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return q, fmt.Errorf("malformed query: %w", err)
	}
	for key, vals := range values {
		if len(vals) > 1 {
			return q, fmt.Errorf("query parameter %q given %d times; give it once", key, len(vals))
		}
		v := vals[0]
		switch key {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > h.opts.MaxLimit {
				return q, fmt.Errorf("limit must be a whole number from 1 to %d, got %q", h.opts.MaxLimit, v)
			}
			q.list.Limit = n
		case "continue":
			q.list.After = v
		case "state":
			for s := range strings.SplitSeq(v, ",") {
				st, ok := states[strings.TrimSpace(s)]
				if !ok {
					return q, fmt.Errorf("state %q is not one of %s", s, stateNames)
				}
				q.list.States = append(q.list.States, st)
			}
		case "format":
			switch v {
			case "json":
			case "text":
				q.text = true
			default:
				return q, fmt.Errorf("format must be json or text, got %q", v)
			}
		default:
			return q, fmt.Errorf("unknown query parameter %q; known: limit, continue, state, format", key)
		}
	}
	if _, set := values["format"]; !set {
		q.text = wantsText(r.Header.Get("Accept"))
	}
	return q, nil
}

var states = map[string]fleet.State{}

var stateNames string

func init() {
	var names []string
	for _, st := range []fleet.State{fleet.StateWanted, fleet.StateAdmitted, fleet.StateStarting, fleet.StateEngaged, fleet.StateDisconnected} {
		states[string(st)] = st
		names = append(names, string(st))
	}
	stateNames = strings.Join(names, ", ")
}

// wantsText reports whether an Accept header prefers text/plain to JSON:
// it names text/plain and not application/json (curl sends */*: JSON).
func wantsText(accept string) bool {
	return strings.Contains(accept, "text/plain") && !strings.Contains(accept, "application/json")
}

// ServeHTTP answers GET and HEAD with a page of the fleet's clusters.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, fmt.Sprintf("method %s not allowed: the status endpoint is read-only", r.Method), http.StatusMethodNotAllowed)
		return
	}
	q, err := h.parse(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	page, total, more := h.lister.List(q.list)
	doc := List{Kind: "ClusterStatusList", Total: total, Clusters: make([]Cluster, len(page))}
	for i, s := range page {
		doc.Clusters[i] = fromStatus(s)
	}
	if more && len(page) > 0 {
		doc.Continue = page[len(page)-1].Name
	}
	var buf bytes.Buffer
	if q.text {
		next := ""
		if doc.Continue != "" {
			values := r.URL.Query()
			values.Set("continue", doc.Continue)
			next = "?" + values.Encode()
		}
		writeText(&buf, doc, next, time.Now())
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // error texts read "a->b", not "a-\u003eb"
		if err := enc.Encode(doc); err != nil {
			http.Error(w, fmt.Sprintf("encoding the status: %v", err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(buf.Bytes())
}

func fromStatus(s fleet.ClusterStatus) Cluster {
	c := Cluster{
		Name: s.Name, State: string(s.State), Since: timeOrNil(s.Since),
		Paused: s.Paused, OwnedHere: s.Owned, Owner: s.Owner,
		LastError: redact.Paths(s.LastError), LastErrorTime: timeOrNil(s.LastErrorAt),
	}
	if p := s.LastProbe; !p.At.IsZero() {
		c.LastProbe = &Probe{Time: p.At.UTC(), Result: p.Result, LatencySeconds: p.Latency.Seconds()}
	}
	return c
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// maxErrorText bounds an error's text in the text form: one line per
// cluster stays one line on a terminal; the JSON has all of it.
const maxErrorText = 160

// writeText writes doc as aligned columns, one line per cluster, then a
// comment line that tells how many there are and how to ask for the next
// page.
func writeText(buf *bytes.Buffer, doc List, next string, now time.Time) {
	tw := tabwriter.NewWriter(buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tFOR\tPAUSED\tOWNER\tPROBE\tLATENCY\tLAST ERROR")
	for _, c := range doc.Clusters {
		owner := "here"
		if !c.OwnedHere {
			owner = "elsewhere"
		}
		if c.Owner != "" {
			owner = c.Owner
		}
		probe, latency := "-", "-"
		if p := c.LastProbe; p != nil {
			probe = p.Result
			latency = time.Duration(p.LatencySeconds * float64(time.Second)).Round(10 * time.Microsecond).String()
		}
		lastErr := "-"
		if c.LastError != "" {
			lastErr = oneLine(c.LastError)
			if len(lastErr) > maxErrorText {
				lastErr = strings.ToValidUTF8(lastErr[:maxErrorText], "") + "..."
			}
			if c.LastErrorTime != nil {
				lastErr = age(now, *c.LastErrorTime) + " ago: " + lastErr
			}
		}
		since := "-"
		if c.Since != nil {
			since = age(now, *c.Since)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%s\t%s\t%s\n",
			oneLine(c.Name), c.State, since, c.Paused, oneLine(owner), probe, latency, lastErr)
	}
	_ = tw.Flush()
	fmt.Fprintf(buf, "# %d of %d clusters", len(doc.Clusters), doc.Total)
	if next != "" {
		fmt.Fprintf(buf, "; next page: %s", next)
	}
	buf.WriteByte('\n')
}

// oneLine keeps a text on one line and in its column, and a terminal's
// escape sequences out of it: names and errors come from the inventory and
// the clusters, and may hold tabs, newlines or escapes.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// age is how long ago t was, to the second.
func age(now, t time.Time) string {
	return max(now.Sub(t), 0).Round(time.Second).String()
}
