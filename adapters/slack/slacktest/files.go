package slacktest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Where files live on the server.
const (
	uploadPath = "/upload/v1/"
	filesPath  = "/files-pri/"
	signinPath = "/signin"
	// maxFileSize is the largest file Slack takes: 1 GB.
	maxFileSize = 1 << 30
)

// file is a file uploaded by a person or the bot.
type file struct {
	id, name, title, mime string
	user                  string
	data                  []byte
	length                int // announced by files.getUploadURLExternal
	uploaded              bool
	completed             bool
	created               time.Time
	shares                []share
}

// share is a message a file was shared in.
type share struct{ channel, ts string }

// newFile registers a file. Callers hold s.mu.
func (s *Server) newFile(userID, name, title, mimeType string) *file {
	if mimeType == "" {
		mimeType = mime.TypeByExtension(strings.ToLower(fileExt(name)))
	}
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	f := &file{id: s.nextID('F'), name: name, title: title, mime: mimeType, user: userID, created: s.now()}
	s.files[f.id] = f
	return f
}

func (f *file) privatePath() string {
	return filesPath + teamID + "-" + f.id + "/" + url.PathEscape(f.name)
}

func (f *file) downloadPath() string {
	return filesPath + teamID + "-" + f.id + "/download/" + url.PathEscape(f.name)
}

// public reports whether the file is shared in a public channel. Callers
// hold s.mu.
func (f *file) public(s *Server) bool {
	for _, sh := range f.shares {
		if c := s.channels[sh.channel]; c != nil && !c.im {
			return true
		}
	}
	return false
}

func fileExt(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i:]
	}
	return ""
}

// getUploadURL is files.getUploadURLExternal: a file id and a URL to send
// its bytes to.
func (s *Server) getUploadURL(r *request) (obj, *apiError) {
	name := r.p["filename"]
	length, err := strconv.Atoi(r.p["length"])
	if name == "" || err != nil || length <= 0 {
		return nil, errCode("invalid_arguments")
	}
	if length > maxFileSize {
		return nil, errCode("file_upload_size_restricted")
	}
	f := s.newFile(s.BotUserID, name, name, "")
	f.length = length
	ticket := newUUID()
	s.uploads[ticket] = f
	return obj{"upload_url": s.base + uploadPath + ticket, "file_id": f.id}, nil
}

// serveUpload takes a file's bytes at its upload URL: the multipart form
// field "file" as slack-go sends it, or the raw body. It answers as Slack
// does, "OK - <size>".
func (s *Server) serveUpload(w http.ResponseWriter, hr *http.Request, ticket string) {
	if hr.Method != http.MethodPost && hr.Method != http.MethodPut {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var data []byte
	var err error
	body := http.MaxBytesReader(w, hr.Body, maxFileSize+1<<20)
	if mt, _, _ := mime.ParseMediaType(hr.Header.Get("Content-Type")); mt == "multipart/form-data" {
		hr.Body = body
		var part io.ReadCloser
		part, _, err = hr.FormFile("file")
		if err == nil {
			data, err = io.ReadAll(part)
			_ = part.Close()
		}
	} else {
		data, err = io.ReadAll(body)
	}
	if err != nil {
		http.Error(w, "bad upload: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	f := s.uploads[ticket]
	if f != nil {
		delete(s.uploads, ticket)
		f.data, f.uploaded = data, true
		s.changed()
	}
	s.mu.Unlock()
	if f == nil {
		http.Error(w, "upload url not found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = fmt.Fprintf(w, "OK - %d", len(data))
}

// completeUpload is files.completeUploadExternal: the files become a
// message of the bot in channel_id (in thread_ts), with initial_comment
// as its text. Slack shares the file a moment later and answers only with
// the files; the fake shares it at once. Without channel_id the file stays
// private.
func (s *Server) completeUpload(r *request) (obj, *apiError) {
	var summaries []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(r.p["files"]), &summaries); err != nil || len(summaries) == 0 {
		return nil, errCode("invalid_arguments")
	}
	var fs []*file
	for _, sm := range summaries {
		f := s.files[sm.ID]
		if f == nil || !f.uploaded || f.completed || f.user != s.BotUserID {
			return nil, errCode("file_not_found")
		}
		fs = append(fs, f)
	}
	var c *channel
	if id := firstOf(r.p, "channel_id", "channels"); id != "" {
		var e *apiError
		if c, e = s.resolveChannel(strings.Split(id, ",")[0], false); e != nil {
			return nil, e
		}
		if !c.botMember {
			return nil, errCode("not_in_channel")
		}
		if c.archived {
			return nil, errCode("is_archived")
		}
	}
	blocks, e := checkBlocks(r.p["blocks"])
	if e != nil {
		return nil, e
	}
	out := make([]obj, len(fs))
	for i, f := range fs {
		f.completed = true
		if summaries[i].Title != "" {
			f.title = summaries[i].Title
		}
		out[i] = obj{"id": f.id, "title": f.title}
	}
	if c != nil {
		m := s.botMessage(c, r.p["thread_ts"])
		m.subtype = "file_share"
		m.text, m.blocks, m.files = r.p["initial_comment"], blocks, fs
		for _, f := range fs {
			f.shares = append(f.shares, share{channel: c.id, ts: m.ts})
		}
		s.addMessage(c, m)
		s.notify(c, s.messageEvent(c, m))
	}
	s.changed()
	return obj{"files": out}, nil
}

// filesInfo is files.info.
func (s *Server) filesInfo(r *request) (obj, *apiError) {
	f := s.files[r.p["file"]]
	if f == nil || !f.uploaded {
		return nil, errCode("file_not_found")
	}
	w := s.wireFile(f)
	channels, ims := []string{}, []string{}
	public, private := obj{}, obj{}
	for _, sh := range f.shares {
		c := s.channels[sh.channel]
		info := obj{"ts": sh.ts, "reply_users": []string{}, "reply_users_count": 0, "reply_count": 0, "team_id": s.TeamID}
		if m := c.msgs[sh.ts]; m != nil && m.isReply() {
			info["thread_ts"] = m.threadTS
		}
		if c.im {
			ims = append(ims, c.id)
			private[c.id] = append(asList(private[c.id]), info)
		} else {
			channels = append(channels, c.id)
			info["channel_name"] = c.name
			public[c.id] = append(asList(public[c.id]), info)
		}
	}
	w["channels"], w["ims"], w["groups"] = channels, ims, []string{}
	w["shares"] = obj{"public": public, "private": private}
	return obj{"file": w, "comments": []obj{}, "response_metadata": obj{"next_cursor": ""}}, nil
}

func asList(v any) []obj {
	l, _ := v.([]obj)
	return l
}

// serveDownload serves a file's url_private(_download) to a request with
// the bot token (and files:read). Without it, like files.slack.com, it
// redirects to the sign-in page with redir naming the file, which slack-go
// recognizes.
func (s *Server) serveDownload(w http.ResponseWriter, hr *http.Request) {
	rest := strings.TrimPrefix(hr.URL.Path, filesPath)
	ref, _, _ := strings.Cut(rest, "/")
	_, id, _ := strings.Cut(ref, "-")
	s.mu.Lock()
	f := s.files[id]
	authorized := bearer(hr) == s.BotToken && s.scopes["files:read"]
	found := f != nil && f.uploaded
	var data []byte
	var mimeType string
	if found {
		data, mimeType = f.data, f.mime
	}
	s.mu.Unlock()
	switch {
	case !authorized:
		http.Redirect(w, hr, signinPath+"?redir="+url.QueryEscape(hr.URL.Path), http.StatusFound)
	case !found:
		http.NotFound(w, hr)
	default:
		w.Header().Set("Content-Type", mimeType)
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data)
	}
}

// serveSignin is the page a download without the token lands on.
func serveSignin(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!DOCTYPE html><html><head><title>Sign in | Slack</title></head><body>Sign in to Parley Test</body></html>")
}
