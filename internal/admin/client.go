package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Client reads a latch server's admin API.
type Client struct {
	// Base is the server's base URL, for example "http://127.0.0.1:11280".
	Base string
	// HTTP is the client to use; nil: http.DefaultClient.
	HTTP *http.Client
}

// NewClient returns a Client for the admin server at addr: a host:port or
// a base URL.
func NewClient(addr string) *Client {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &Client{Base: strings.TrimRight(base, "/")}
}

// do sends req with the admin token, if any, on c's HTTP client.
func (c *Client) do(req *http.Request, token string) (*http.Response, error) {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	return hc.Do(req)
}

// get fetches path (with its query) and returns the body, failing on any
// status but 200.
func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.do(req, "")
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, fmt.Errorf("admin client: GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e Error
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("admin client: GET %s: %s: %s", path, resp.Status, e.Error)
		}
		return nil, fmt.Errorf("admin client: GET %s: %s", path, resp.Status)
	}
	return body, nil
}

func (c *Client) getJSON(ctx context.Context, path string, v any) error {
	body, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("admin client: GET %s: %w", path, err)
	}
	return nil
}

// LocksPage fetches one page of GET /v1/locks.
func (c *Client) LocksPage(ctx context.Context, prefix, after string, limit int) (LockList, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/locks"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l LockList
	err := c.getJSON(ctx, path, &l)
	return l, err
}

// Locks fetches every key with the given prefix, following the pages.
func (c *Client) Locks(ctx context.Context, prefix string) (LockList, error) {
	var all LockList
	after := ""
	for {
		page, err := c.LocksPage(ctx, prefix, after, maxLimit)
		if err != nil {
			return LockList{}, err
		}
		if all.Time.IsZero() {
			all.Time = page.Time
		}
		all.Locks = append(all.Locks, page.Locks...)
		if page.Next == "" {
			return all, nil
		}
		if page.Next <= after {
			return LockList{}, errors.New("admin client: the server's next cursor does not advance")
		}
		after = page.Next
	}
}

// Lock fetches GET /v1/locks/{key}.
func (c *Client) Lock(ctx context.Context, key string) (Lock, error) {
	var l Lock
	err := c.getJSON(ctx, "/v1/locks/"+url.PathEscape(key), &l)
	return l, err
}

// Sessions fetches GET /v1/sessions.
func (c *Client) Sessions(ctx context.Context) (SessionList, error) {
	var l SessionList
	err := c.getJSON(ctx, "/v1/sessions", &l)
	return l, err
}

// Raw fetches path and returns the body as the server sent it.
func (c *Client) Raw(ctx context.Context, path string) ([]byte, error) {
	return c.get(ctx, path)
}
