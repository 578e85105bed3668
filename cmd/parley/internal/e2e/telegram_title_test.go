package e2e

import (
	"strings"
	"testing"
	"testing/synctest"
)

// TestTelegramUntitledTopicNamedByFirstMessage: /new without a title makes
// a topic named with the placeholder ("Session Nov 23 21:04"), which the
// adapter passes on as one; the first message with text then names the
// session, and the topic with it. A title given with /new stays.
func TestTelegramUntitledTopicNamedByFirstMessage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStack(t, true)
		name := func(topic int) string {
			for _, tp := range st.srv.Topics(st.forum) {
				if tp.ID == topic {
					return tp.Name
				}
			}
			return ""
		}
		untitled := st.newTopic("")
		if n := name(untitled); !strings.HasPrefix(n, "💬 Session ") {
			t.Fatalf("the untitled topic is named %q, want the placeholder", n)
		}
		st.srv.SendText(st.forum, untitled, ann, "Why does the deploy hang?\nSince this morning.")
		st.await("the topic named by the first message", func() bool {
			return strings.HasSuffix(name(untitled), " Why does the deploy hang?")
		})

		titled := st.newTopic("Release plan")
		st.srv.SendText(st.forum, titled, ann, "What is left?")
		// The topic shows the session working, under the title it had.
		st.await("the titled topic working", func() bool { return name(titled) == "⏳ Release plan" })
	})
}
