package telegramtest_test

import (
	"context"
	"testing"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// TestChatMembers: getChatAdministrators and getChatMember answer with the
// member's status as Telegram shows it: the group's creator, the bot as
// an administrator with exactly its rights (can_manage_topics only in a
// forum) or a plain member, people who wrote as members, anyone else as
// having left; a private chat has no administrators.
func TestChatMembers(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	plain := srv.NewGroupWithoutTopics("plain")
	private := srv.NewPrivateChat(alice)
	b := newBot(t, srv)
	ctx := context.Background()
	botID := srv.Bot().ID

	admins, err := b.GetChatAdministrators(ctx, &bot.GetChatAdministratorsParams{ChatID: forum})
	if err != nil {
		t.Fatal(err)
	}
	if len(admins) != 2 || admins[0].Type != models.ChatMemberTypeOwner || admins[0].Owner.User.ID == botID ||
		admins[1].Type != models.ChatMemberTypeAdministrator || admins[1].Administrator.User.ID != botID ||
		!admins[1].Administrator.CanManageTopics || !admins[1].Administrator.CanDeleteMessages {
		t.Fatalf("forum administrators = %+v, want the creator and the bot with its rights", admins)
	}

	// In a supergroup without topics there are no topics to manage, even
	// with the right granted.
	me, err := b.GetChatMember(ctx, &bot.GetChatMemberParams{ChatID: plain, UserID: botID})
	if err != nil || me.Type != models.ChatMemberTypeAdministrator || me.Administrator.CanManageTopics {
		t.Errorf("bot in a group without topics = %+v, %v; want an administrator without can_manage_topics", me, err)
	}

	// Demoted, the bot is a plain member and no longer listed.
	srv.SetBotRights(forum, telegramtest.Rights{})
	admins, err = b.GetChatAdministrators(ctx, &bot.GetChatAdministratorsParams{ChatID: forum})
	if err != nil || len(admins) != 1 || admins[0].Type != models.ChatMemberTypeOwner {
		t.Errorf("administrators after demotion = %+v, %v; want the creator alone", admins, err)
	}
	me, err = b.GetChatMember(ctx, &bot.GetChatMemberParams{ChatID: forum, UserID: botID})
	if err != nil || me.Type != models.ChatMemberTypeMember || me.Member.User.ID != botID {
		t.Errorf("demoted bot = %+v, %v; want a member", me, err)
	}

	srv.SendText(forum, 0, alice, "hi")
	who, err := b.GetChatMember(ctx, &bot.GetChatMemberParams{ChatID: forum, UserID: alice.ID})
	if err != nil || who.Type != models.ChatMemberTypeMember || who.Member.User.Username != "alice" {
		t.Errorf("a person who wrote = %+v, %v; want a member with her name", who, err)
	}
	who, err = b.GetChatMember(ctx, &bot.GetChatMemberParams{ChatID: forum, UserID: 999})
	if err != nil || who.Type != models.ChatMemberTypeLeft || who.Left.User.ID != 999 {
		t.Errorf("a stranger = %+v, %v; want left", who, err)
	}

	_, err = b.GetChatAdministrators(ctx, &bot.GetChatAdministratorsParams{ChatID: private})
	wantBadRequest(t, err, "Bad Request: there are no administrators in the private chat")
	_, err = b.GetChatAdministrators(ctx, &bot.GetChatAdministratorsParams{ChatID: 42})
	wantBadRequest(t, err, "Bad Request: chat not found")
}
