// Chat templates: family detection from real template texts' markers, and the exact text each
// family renders for a conversation with a system prompt and two user turns.
#include "iwb/engine/chat/chat_template.h"
#include "iwb/engine/chat/reply_parts.h"
#include "iwb/engine/clock_text.h"

#include <QtTest>

using namespace iwb;

namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you?"},
};

}  // namespace

class TestChatTemplate : public QObject {
  Q_OBJECT

 private slots:
  // enable_thinking and reasoning_effort as the templates read them (jinja2 gives the same,
  // scripts/templates-vs-jinja.py --kwargs, on Qwen3-0.6B's, SmolLM3's and gpt-oss's templates).
  void thinkingControls() {
    ChatRenderOptions o;
    o.closes_think_when_off = chat_template_closes_think_when_off(
        "<|im_start|>{%- if enable_thinking is defined and enable_thinking is false %}{{- "
        "'<think>\\n\\n</think>\\n\\n' }}");
    QVERIFY(o.closes_think_when_off);
    QVERIFY(!chat_template_closes_think_when_off("{{ '<|im_start|>' }}"));
    const std::vector<ChatMessage> hi = {{"user", "Hi"}};
    QCOMPARE(render_chat(ChatTemplateFamily::ChatMl, hi, o),
             std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    o.enable_thinking = true;
    QCOMPARE(render_chat(ChatTemplateFamily::ChatMl, hi, o),
             std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    o.enable_thinking = false;
    QCOMPARE(render_chat(ChatTemplateFamily::ChatMl, hi, o),
             std::string("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    // SmolLM3: the kwarg sets the mode, a /think or /no_think in the system message overrides it.
    ChatRenderOptions smol;
    smol.enable_thinking = false;
    QVERIFY(render_chat(ChatTemplateFamily::SmolLM3, hi, smol).find("Reasoning Mode: /no_think") != std::string::npos);
    QVERIFY(render_chat(ChatTemplateFamily::SmolLM3, {{"system", "Go /think"}, {"user", "Hi"}}, smol)
                .find("Reasoning Mode: /think") != std::string::npos);
    smol.enable_thinking = true;
    QVERIFY(render_chat(ChatTemplateFamily::SmolLM3, {{"system", "Quick /no_think"}, {"user", "Hi"}}, smol)
                .find("Reasoning Mode: /no_think") != std::string::npos);
    // gpt-oss: "Reasoning: medium" unless said.
    ChatRenderOptions oss;
    QVERIFY(render_chat(ChatTemplateFamily::Harmony, hi, oss).find("\nReasoning: medium\n") != std::string::npos);
    oss.reasoning_effort = "high";
    QVERIFY(render_chat(ChatTemplateFamily::Harmony, hi, oss).find("\nReasoning: high\n") != std::string::npos);
  }

  void detection_data() {
    QTest::addColumn<QString>("jinja");
    QTest::addColumn<QString>("family");
    QTest::newRow("qwen2") << "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                              "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                           << "chatml";
    QTest::newRow("llama3") << "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
                               "message['content'] | trim + '<|eot_id|>' %}"
                            << "llama3";
    QTest::newRow("llama2") << "{{ bos_token + '[INST] ' + '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' }}"
                            << "llama2";
    QTest::newRow("mistral")
        << "{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
        << "mistral";
    QTest::newRow("gemma") << "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
                           << "gemma";
    QTest::newRow("phi3")
        << "{{'<|' + message['role'] + '|>' + '\\n' + message['content'] + '<|end|>\\n' }}{{ '<|assistant|>\\n' }}"
        << "phi3";
    // Phi-3.5-mini-instruct's tokenizer_config.json template.
    QTest::newRow("phi3.5")
        << "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}"
           "{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}"
           "{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}"
           "{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}"
           "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"
        << "phi3";
    QTest::newRow("zephyr") << "{{ '<|user|>\\n' + message['content'] + eos_token }}{{ '<|assistant|>' }}"
                            << "zephyr";
    // OLMo-2-1124-Instruct's tokenizer_config.json template (Tülu 3's).
    QTest::newRow("olmo2")
        << "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'system' %}{{ '<|system|>\\n' + "
           "message['content'] + '\\n' }}{% elif message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + "
           "'\\n' }}{% elif message['role'] == 'assistant' %}{% if not loop.last %}{{ '<|assistant|>\\n'  + "
           "message['content'] + eos_token + '\\n' }}{% else %}{{ '<|assistant|>\\n'  + message['content'] + eos_token "
           "}}{% endif %}{% endif %}{% if loop.last and add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
           "{% endfor %}"
        << "tulu";
    // SmolLM3's: ChatML turns behind its own system block.
    QTest::newRow("smollm3")
        << "{{- \"<|im_start|>system\\n\" -}}{{- \"Reasoning Mode: \" + reasoning_mode + \"\\n\\n\" -}}"
        << "smollm3";
    // gpt-oss's chat_template.jinja (harmony): also writes <|end|>, so it must not read as phi3.
    QTest::newRow("harmony")
        << "{{- \"<|start|>system<|message|>\" }}{{- build_system_message() }}{{- \"<|end|>\" }}"
           "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}"
        << "harmony";
    QTest::newRow("unknown") << "{{ messages[0]['content'] }}"
                             << "plain";
    QTest::newRow("empty") << ""
                           << "plain";
  }

  void detection() {
    QFETCH(QString, jinja);
    QFETCH(QString, family);
    const std::string text = jinja.toStdString();
    QCOMPARE(QString::fromUtf8(chat_template_family_name(detect_chat_template(text)).data()), family);
  }

  void namesRoundTrip() {
    for (auto f : {ChatTemplateFamily::ChatMl, ChatTemplateFamily::Llama2, ChatTemplateFamily::Llama3,
                   ChatTemplateFamily::Mistral, ChatTemplateFamily::Gemma, ChatTemplateFamily::Phi3,
                   ChatTemplateFamily::Zephyr, ChatTemplateFamily::Harmony, ChatTemplateFamily::Plain,
                   ChatTemplateFamily::Tulu, ChatTemplateFamily::SmolLM3, ChatTemplateFamily::Granite}) {
      QCOMPARE(chat_template_family_from_name(chat_template_family_name(f)).value(), f);
    }
    QVERIFY(!chat_template_family_from_name("jinja").has_value());
  }

  void rendering_data() {
    QTest::addColumn<QString>("family");
    QTest::addColumn<QString>("expected");
    QTest::newRow("chatml") << "chatml"
                            << "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                               "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you?<|im_end|>\n"
                               "<|im_start|>assistant\n";
    QTest::newRow("llama3") << "llama3"
                            << "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                               "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
                               "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\n";
    QTest::newRow("llama2") << "llama2"
                            << "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHello [/INST] Hi there </s>"
                               "<s>[INST] Who are you? [/INST]";
    QTest::newRow("mistral") << "mistral"
                             << "<s>[INST] You are terse.\n\nHello [/INST] Hi there </s><s>[INST] Who are you? [/INST]";
    QTest::newRow("gemma")
        << "gemma"
        << "<s><start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>\n"
           "<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you?<end_of_turn>\n"
           "<start_of_turn>model\n";
    QTest::newRow("phi3")
        << "phi3"
        << "<|system|>\nYou are terse.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
           "<|user|>\nWho are you?<|end|>\n<|assistant|>\n";
    QTest::newRow("zephyr") << "zephyr"
                            << "<|system|>\nYou are terse.</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi there</s>\n"
                               "<|user|>\nWho are you?</s>\n<|assistant|>\n";
    // Expected texts of these two: jinja2 rendering the real templates (OLMo 2's, and
    // llama.cpp's models/templates/HuggingFaceTB-SmolLM3-3B.jinja) for the same conversation.
    QTest::newRow("tulu") << "tulu"
                          << "<s><|system|>\nYou are terse.\n<|user|>\nHello\n<|assistant|>\nHi there</s>\n"
                             "<|user|>\nWho are you?\n<|assistant|>\n";
    QTest::newRow("smollm3") << "smollm3"
                             << "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: "
                                "/think\n\n## Custom Instructions\n\nYou are terse.\n\n<|im_end|>\n<|im_start|>user\n"
                                "Hello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are "
                                "you?<|im_end|>\n<|im_start|>assistant\n";
    QTest::newRow("harmony") << "harmony"
                             << "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                                "Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n# Valid channels: analysis, "
                                "commentary, final. Channel must be included for every message.<|end|>"
                                "<|start|>developer<|message|># Instructions\n\nYou are terse.\n\n<|end|>"
                                "<|start|>user<|message|>Hello<|end|>"
                                "<|start|>assistant<|channel|>final<|message|>Hi there<|end|>"
                                "<|start|>user<|message|>Who are you?<|end|><|start|>assistant";
    QTest::newRow("plain")
        << "plain"
        << "<s>System: You are terse.\nUser: Hello\nAssistant: Hi there\nUser: Who are you?\nAssistant:";
  }

  void rendering() {
    QFETCH(QString, family);
    QFETCH(QString, expected);
    const auto f = chat_template_family_from_name(family.toStdString());
    QVERIFY(f.has_value());
    ChatRenderOptions o;
    o.bos_text = *f == ChatTemplateFamily::Llama3 ? "<|begin_of_text|>" : "<s>";
    const std::string out = render_chat(*f, kConversation, o);
    QCOMPARE(QString::fromStdString(out), expected);
    // Every family's stop strings are non-empty and none occurs in the rendered user content.
    QVERIFY(!chat_stop_strings(*f).empty());
  }

  // SmolLM3 without thinking: /no_think in the system message (taken out of the instructions,
  // trailing white space too), an empty <think> block opening every assistant turn and the
  // reply, newlines before an assistant's text dropped, a tool result as a user turn. The
  // expected text is jinja2's rendering of llama.cpp's copy of the template.
  void smollm3WithoutThinking() {
    const std::vector<ChatMessage> conversation = {{"system", "Answer in French. /no_think  "},
                                                   {"user", "Hello"},
                                                   {"assistant", "\n\nBonjour"},
                                                   {"tool", "42"},
                                                   {"user", "Who?"}};
    ChatRenderOptions o;
    QCOMPARE(QString::fromStdString(render_chat(ChatTemplateFamily::SmolLM3, conversation, o)),
             QString("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: "
                     "/no_think\n\n## Custom Instructions\n\nAnswer in French.\n\n<|im_end|>\n<|im_start|>user\n"
                     "Hello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\nBonjour<|im_end|>\n"
                     "<|im_start|>user\n42<|im_end|>\n<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n"
                     "<think>\n\n</think>\n"));
    // Hugging Face's original template adds today's date after the knowledge cutoff.
    QCOMPARE(chat_template_smollm3_date("{{- \"Reasoning Mode: \" + reasoning_mode -}}"), std::string());
    const std::string date = chat_template_smollm3_date(
        "{%- set today = strftime_now(\"%d %B %Y\") -%}{{- \"Today Date: \" + today + \"\\n\" -}}"
        "{{- \"Reasoning Mode: \" + reasoning_mode + \"\\n\\n\" -}}");
    QCOMPARE(date, now_as_text("%d %B %Y", ClockZone::Local));
    ChatRenderOptions dated;
    dated.smollm3_date = "06 December 2026";
    QVERIFY(
        render_chat(ChatTemplateFamily::SmolLM3, conversation, dated)
            .starts_with("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 06 "
                         "December 2026\nReasoning Mode: /no_think\n\n## Custom Instructions\n\nAnswer in French."));
    // Without a system message: the template's own instructions for thinking.
    const std::string bare = render_chat(ChatTemplateFamily::SmolLM3, {{"user", "Hi"}}, o);
    QVERIFY(bare.find("Reasoning Mode: /think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named "
                      "SmolLM, trained by Hugging Face. Your role") != std::string::npos);
    QVERIFY(bare.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
  }

  // Granite 3.x (the expected text: jinja2 rendering llama.cpp's copy of granite-3.3-2B-Instruct's
  // template): the conversation's system message as the system turn, else the template's own
  // with today's date.
  void granite() {
    QCOMPARE(
        detect_chat_template("{{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_text|>' }}"),
        ChatTemplateFamily::Granite);
    ChatRenderOptions o;
    QCOMPARE(QString::fromStdString(render_chat(ChatTemplateFamily::Granite, kConversation, o)),
             QString("<|start_of_role|>system<|end_of_role|>You are terse.<|end_of_text|>\n"
                     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n"
                     "<|start_of_role|>assistant<|end_of_role|>Hi there<|end_of_text|>\n"
                     "<|start_of_role|>user<|end_of_role|>Who are you?<|end_of_text|>\n"
                     "<|start_of_role|>assistant<|end_of_role|>"));
    const std::string bare = render_chat(ChatTemplateFamily::Granite, {{"user", "Hi"}}, o);
    QCOMPARE(QString::fromStdString(bare),
             QString::fromStdString("<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. "
                                    "Today's Date: " +
                                    now_as_text("%B %d, %Y", ClockZone::Local) +
                                    ". You are Granite, developed by IBM. You are a helpful AI assistant."
                                    "<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
                                    "<|start_of_role|>assistant<|end_of_role|>"));
  }

  void replyPartsOfHarmony() {
    const std::string reply =
        "<|channel|>analysis<|message|>Think one.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.f <|constrain|>json<|message|>{}<|call|>"
        "<|start|>assistant<|channel|>analysis<|message|>Think two.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>The answer<|return|>";
    const ReplyParts parts = split_reply(reply);
    QCOMPARE(parts.reasoning, std::string("Think one.\n\nThink two."));
    QCOMPARE(parts.content, std::string("{}\n\nThe answer"));
    QVERIFY(!parts.is_reasoning);
    // Every prefix, as a stream shows it: no marker text ever appears, both parts only grow,
    // and the reply is "still thinking" exactly inside an analysis message.
    std::string last_reasoning, last_content;
    for (size_t n = 0; n <= reply.size(); ++n) {
      const ReplyParts p = split_reply(std::string_view(reply).substr(0, n), /*is_streaming=*/true);
      for (const std::string* part : {&p.reasoning, &p.content}) {
        QVERIFY2(part->find("<|") == std::string::npos && part->find("analysis") == std::string::npos &&
                     part->find("assistant") == std::string::npos && part->find("json") == std::string::npos,
                 part->c_str());
      }
      QVERIFY2(p.reasoning.rfind(last_reasoning, 0) == 0, p.reasoning.c_str());
      QVERIFY2(p.content.rfind(last_content, 0) == 0, p.content.c_str());
      last_reasoning = p.reasoning;
      last_content = p.content;
    }
    QVERIFY(split_reply("<|channel|>analysis<|message|>Still going", true).is_reasoning);
    QCOMPARE(split_reply("<|channel|>final<|message|>Partial").content, std::string("Partial"));
    QCOMPARE(split_reply("no channels").content, std::string("no channels"));
    QCOMPARE(split_reply("a < b").content, std::string("a < b"));
    // A reply that only mentions the markers is an answer like any other.
    const std::string about = "Harmony writes <|channel|>final<|message|>Hi<|return|> at the end.";
    QCOMPARE(split_reply(about).content, about);
    QVERIFY(split_reply(about).reasoning.empty());
  }

  void replyPartsOfThinkTags() {
    ReplyParts p = split_reply("<think>\nLet me see.\n</think>\n\n42");
    QCOMPARE(p.reasoning, std::string("Let me see."));
    QCOMPARE(p.content, std::string("42"));
    QVERIFY(!p.is_reasoning);
    p = split_reply("<think>\nStill</th", /*is_streaming=*/true);
    QCOMPARE(p.reasoning, std::string("Still"));
    QVERIFY(p.is_reasoning);
    QVERIFY(p.content.empty());
    QCOMPARE(split_reply("<thi", true).content, std::string());                  // may become <think>: held back
    QCOMPARE(split_reply("<thi").content, std::string("<thi"));                  // unless the reply has ended
    QCOMPARE(split_reply("x <|", true).content, std::string("x <|"));            // only a harmony reply's tails
    QCOMPARE(split_reply("I <think> so").content, std::string("I <think> so"));  // not at the start
    QCOMPARE(split_reply("<b>bold</b>").content, std::string("<b>bold</b>"));
  }

  void phi3LeavesOutAnEmptySystemMessage() {
    // Phi-3.5's template writes a system turn only when it has text; its stop strings end a turn.
    const std::string out = render_chat(ChatTemplateFamily::Phi3, {{"system", ""}, {"user", "Hi"}}, {});
    QCOMPARE(QString::fromStdString(out), QString("<|user|>\nHi<|end|>\n<|assistant|>\n"));
    QCOMPARE(chat_stop_strings(ChatTemplateFamily::Phi3).front(), std::string("<|end|>"));
  }

  void harmonyFinalChannel() {
    // Without a system prompt there is no developer message; the reply's analysis channel is
    // not the answer, its final channel is; the stop strings do not cut the analysis off.
    const std::string out = render_chat(ChatTemplateFamily::Harmony, {{"user", "Hi"}}, {});
    QVERIFY(!QString::fromStdString(out).contains("developer"));
    QVERIFY(QString::fromStdString(out).endsWith("<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant"));
    const std::string reply =
        "<|channel|>analysis<|message|>User says "
        "hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>";
    QCOMPARE(split_reply(reply).content, std::string("Hello!"));
    QCOMPARE(split_reply(reply).reasoning, std::string("User says hi."));
    for (const std::string& stop : chat_stop_strings(ChatTemplateFamily::Harmony)) {
      QVERIFY(reply.find(stop) == std::string::npos || stop == "<|return|>");
    }
  }

  void noGenerationPrompt() {
    ChatRenderOptions o;
    o.add_generation_prompt = false;
    const std::string out = render_chat(ChatTemplateFamily::ChatMl, {{"user", "Hi"}}, o);
    QCOMPARE(QString::fromStdString(out), QString("<|im_start|>user\nHi<|im_end|>\n"));
  }
};

QTEST_GUILESS_MAIN(TestChatTemplate)
#include "test_chat_template.moc"
