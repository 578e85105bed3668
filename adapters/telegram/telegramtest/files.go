package telegramtest

import (
	"bytes"
	"fmt"
	"image"
	_ "image/jpeg" // photo sizes
	_ "image/png"  // photo sizes
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"
)

// maxDownload is the largest file getFile hands out.
const maxDownload = 20 << 20

type fileEntry struct {
	id, unique, path string
	name, mime       string
	size             int64
	content          []byte
	width, height    int
}

func (f *fileEntry) info() *FileInfo {
	if f == nil {
		return nil
	}
	return &FileInfo{ID: f.id, Name: f.name, MIME: f.mime, Size: f.size}
}

// Document is a file the bot uploaded.
type Document struct {
	Chat      int64
	Thread    int
	MessageID int
	Name      string
	MIME      string
	Size      int64
	Caption   string
	Content   []byte
	Silent    bool
	Time      time.Time
}

// Documents returns the files the bot uploaded (sendDocument, sendPhoto),
// oldest first.
func (s *Server) Documents() []Document {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Document(nil), s.documents...)
}

// addFile stores a file for getFile and download. size, when larger than
// the content, is the size Telegram reports. Callers hold s.mu.
func (s *Server) addFile(dir, name, mimeType string, data []byte, size int64) *fileEntry {
	s.nextFile++
	n := s.nextFile
	ext := path.Ext(name)
	if ext == "" {
		switch {
		case dir == "voice":
			ext = ".oga"
		case dir == "photos":
			ext = ".jpg"
		}
	}
	size = max(size, int64(len(data)))
	f := &fileEntry{
		id:      fmt.Sprintf("BQACAgIAAx%s-%d", strings.ToUpper(dir[:2]), n),
		unique:  fmt.Sprintf("AgAD%d", n),
		path:    fmt.Sprintf("%s/file_%d%s", dir, n, ext),
		name:    name,
		mime:    mimeType,
		size:    size,
		content: bytes.Clone(data),
	}
	s.files[f.id] = f
	s.paths[f.path] = f
	return f
}

// addPhoto stores a photo in the sizes Telegram offers: a thumbnail of at
// most 320 pixels and the original.
func (s *Server) addPhoto(data []byte) []*fileEntry {
	w, h := 1280, 960
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
		w, h = cfg.Width, cfg.Height
	}
	var sizes []*fileEntry
	if w > 320 || h > 320 {
		scale := 320 / float64(max(w, h))
		small := s.addFile("photos", "", "image/jpeg", data, 0)
		small.width, small.height = max(1, int(float64(w)*scale)), max(1, int(float64(h)*scale))
		sizes = append(sizes, small)
	}
	full := s.addFile("photos", "", "image/jpeg", data, 0)
	full.width, full.height = w, h
	return append(sizes, full)
}

func (s *Server) getFile(r *request) (any, *Error) {
	id := r.p.str("file_id")
	if id == "" {
		return nil, badRequest("file_id not specified")
	}
	f := s.files[id]
	if f == nil {
		return nil, badRequest("invalid file_id")
	}
	if f.size > maxDownload {
		return nil, badRequest("file is too big")
	}
	return &models.File{FileID: f.id, FileUniqueID: f.unique, FileSize: f.size, FilePath: f.path}, nil
}

// serveFile answers GET /file/bot{token}/{path}.
func (s *Server) serveFile(w http.ResponseWriter, rest string) {
	token, p, ok := strings.Cut(rest, "/")
	s.mu.Lock()
	f := s.paths[p]
	s.mu.Unlock()
	if !ok || token != s.Token || f == nil || f.size > maxDownload {
		writeError(w, &Error{Code: 404, Description: "Not Found"})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(f.content)))
	_, _ = w.Write(f.content)
}

func (s *Server) sendDocument(r *request) (any, *Error) {
	return s.sendUpload(r, "document", "documents")
}

func (s *Server) sendPhoto(r *request) (any, *Error) {
	return s.sendUpload(r, "photo", "photos")
}

// sendUpload sends a document or photo: a new upload in a multipart part,
// or a file_id the server knows.
func (s *Server) sendUpload(r *request, field, dir string) (any, *Error) {
	c, thread, e := s.target(r)
	if e != nil {
		return nil, e
	}
	if e := s.limit(r, c, thread); e != nil {
		return nil, e
	}
	if e := s.writable(c, thread); e != nil {
		return nil, e
	}
	caption, e := parseContent(r.p.str("caption"), r.p.str("parse_mode"), r.p.str("caption_entities"), 1024, "message caption is too long", true)
	if e != nil {
		return nil, e
	}
	markup, e := parseMarkup(r.p)
	if e != nil {
		return nil, e
	}
	var (
		f       *fileEntry
		content []byte
	)
	if fh := r.p.files[field]; fh != nil {
		if fh.Size > maxUpload {
			return nil, &Error{Code: 413, Description: "Request Entity Too Large"}
		}
		rc, err := fh.Open()
		if err != nil {
			return nil, badRequest("can't read the file")
		}
		content, err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, badRequest("can't read the file")
		}
		if len(content) == 0 {
			return nil, badRequest("file must be non-empty")
		}
		mt := mime.TypeByExtension(path.Ext(fh.Filename))
		if i := strings.IndexByte(mt, ';'); i >= 0 {
			mt = mt[:i]
		}
		if mt == "" {
			mt = "application/octet-stream"
		}
		f = s.addFile(dir, fh.Filename, mt, content, 0)
	} else if id := r.p.str(field); id != "" {
		if f = s.files[id]; f == nil {
			return nil, badRequest("wrong file identifier/HTTP URL specified")
		}
		content = f.content
	} else {
		return nil, badRequest("there is no " + field + " in the request")
	}
	m := c.add(&message{thread: thread, fromBot: true, date: r.now, caption: caption, markup: markup, silent: r.p.bool("disable_notification")})
	if field == "photo" {
		m.photo = s.addPhoto(content)
	} else {
		m.document = f
	}
	r.msgID = m.id
	s.documents = append(s.documents, Document{Chat: c.id, Thread: thread, MessageID: m.id, Name: f.name, MIME: f.mime,
		Size: f.size, Caption: caption.text, Content: bytes.Clone(content), Silent: m.silent, Time: r.now})
	return s.wire(m, false), nil
}
