package telegramtest_test

import (
	"context"
	"testing"

	"github.com/go-telegram/bot"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// TestTopicRights: as the Bot API documents, closing and reopening a
// topic needs can_manage_topics unless the bot created the topic, and
// deleting one needs can_delete_messages whoever created it; a change
// that changes nothing is TOPIC_NOT_MODIFIED.
func TestTopicRights(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	plain := srv.NewGroupWithoutTopics("plain")
	b := newBot(t, srv)
	ctx := context.Background()
	mine := createTopic(t, b, forum, "mine")
	theirs := srv.NewTopic(forum, "theirs")
	closeTopic := func(thread int) error {
		_, err := b.CloseForumTopic(ctx, &bot.CloseForumTopicParams{ChatID: forum, MessageThreadID: thread})
		return err
	}

	srv.SetBotRights(forum, telegramtest.Rights{Admin: true})
	if err := closeTopic(mine); err != nil {
		t.Fatalf("closing its own topic without can_manage_topics: %v", err)
	}
	wantBadRequest(t, closeTopic(mine), "Bad Request: TOPIC_NOT_MODIFIED")
	_, err := send(b, forum, mine, "x")
	wantBadRequest(t, err, "Bad Request: TOPIC_CLOSED")
	if _, err := b.ReopenForumTopic(ctx, &bot.ReopenForumTopicParams{ChatID: forum, MessageThreadID: mine}); err != nil {
		t.Fatal(err)
	}
	if _, err := send(b, forum, mine, "open again"); err != nil {
		t.Errorf("send after reopening: %v", err)
	}
	wantBadRequest(t, closeTopic(theirs), "Bad Request: not enough rights to manage topics")
	_, err = b.DeleteForumTopic(ctx, &bot.DeleteForumTopicParams{ChatID: forum, MessageThreadID: mine})
	wantBadRequest(t, err, "Bad Request: not enough rights to manage topics")

	srv.SetBotRights(forum, telegramtest.Rights{Admin: true, DeleteMessages: true})
	if _, err := b.DeleteForumTopic(ctx, &bot.DeleteForumTopicParams{ChatID: forum, MessageThreadID: theirs}); err != nil {
		t.Fatalf("deleting a person's topic with can_delete_messages: %v", err)
	}
	for _, tp := range srv.Topics(forum) {
		if tp.ID == theirs && !tp.Deleted {
			t.Errorf("topic %+v not deleted", tp)
		}
	}
	wantBadRequest(t, closeTopic(theirs), "Bad Request: TOPIC_ID_INVALID")

	_, err = b.CloseForumTopic(ctx, &bot.CloseForumTopicParams{ChatID: plain, MessageThreadID: 5})
	wantBadRequest(t, err, "Bad Request: the chat is not a forum")
}

// TestPeopleChangeTopics: when a person renames, closes or reopens a
// topic, the bot gets the service message in that topic
// (forum_topic_edited, _closed, _reopened), and the topic is what the
// person made it.
func TestPeopleChangeTopics(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	thread := srv.NewTopic(forum, "draft")
	srv.RenameTopic(forum, thread, "release")
	srv.CloseTopic(forum, thread)
	srv.ReopenTopic(forum, thread)

	_, ups, _ := getUpdates(t, srv, `{}`)
	if len(ups) != 4 {
		t.Fatalf("%d updates, want 4 service messages", len(ups))
	}
	for i, u := range ups {
		m := u.Message
		if m == nil || m.MessageThreadID != thread || !m.IsTopicMessage || m.Chat.ID != forum {
			t.Fatalf("update %d = %+v, want a message in topic %d", i, m, thread)
		}
	}
	if c := ups[0].Message.ForumTopicCreated; c == nil || c.Name != "draft" {
		t.Errorf("first update: %+v, want forum_topic_created", ups[0].Message)
	}
	if e := ups[1].Message.ForumTopicEdited; e == nil || e.Name != "release" {
		t.Errorf("second update: %+v, want forum_topic_edited with the new name", ups[1].Message)
	}
	if ups[2].Message.ForumTopicClosed == nil || ups[3].Message.ForumTopicReopened == nil {
		t.Errorf("updates 3 and 4: %+v %+v, want forum_topic_closed then _reopened", ups[2].Message, ups[3].Message)
	}
	if got := srv.Topics(forum); len(got) != 1 || got[0].Name != "release" || got[0].Closed || got[0].ByBot {
		t.Errorf("topics = %+v", got)
	}
	if _, err := send(b, forum, thread, "back"); err != nil {
		t.Errorf("send to the reopened topic: %v", err)
	}
}
