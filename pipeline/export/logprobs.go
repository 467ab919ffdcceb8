package export

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The logprobs column (Options.Logprobs): a record's token logprobs
// (schemas.TurnLogprobs, kept by generate --logprobs), one entry per
// assistant reply. In the messages format an entry names the index of its
// assistant message in the row's messages ("message"); in the sharegpt
// format the index of its gpt turn in conversations ("turn"), as the record
// holds it. An entry whose index names no assistant message (gpt turn) is
// left out and counted (Manifest.LogprobsDropped): the record's
// conversations were changed after the logprobs were kept (compress).

// Names of the logprobs column and of its entries' index.
const (
	columnLogprobs = schemas.MemberLogprobs
	lpMessage      = "message"
	lpTurn         = "turn"
)

// lpEntry is one entry of a row's logprobs column: at is the message
// (messages) or turn (sharegpt) index.
type lpEntry struct {
	at int
	lp *schemas.TurnLogprobs
}

// rowLogprobs reads the logprobs member of line into r (filled by fillRow)
// and returns how many entries were left out for naming no assistant turn.
// It runs in pass 2's workers.
func (p *plan) rowLogprobs(line []byte, r *row) (int64, error) {
	r.logprobs = r.logprobs[:0]
	raw := firstMember(line, schemas.MemberLogprobs)
	if raw == "" || raw == "null" {
		return 0, nil
	}
	var lps []schemas.TurnLogprobs
	if err := json.Unmarshal([]byte(raw), &lps); err != nil {
		return 0, fmt.Errorf("record %s: %s: %w", r.f.key, schemas.MemberLogprobs, err)
	}
	var msgOf []int
	if p.opts.Format == FormatMessages {
		msgOf = messageOfTurn(r.turns, r.msgs)
	}
	var dropped int64
	for i := range lps {
		lp := &lps[i]
		at := -1
		switch {
		case lp.Turn < 0 || lp.Turn >= len(r.turns) || r.turns[lp.Turn].From != fromGPT:
		case p.opts.Format != FormatMessages:
			at = lp.Turn
		case len(msgOf) == len(r.turns):
			at = msgOf[lp.Turn]
		}
		if at < 0 || len(lp.Logprobs) != len(lp.Tokens) {
			dropped++
			continue
		}
		r.logprobs = append(r.logprobs, lpEntry{at: at, lp: lp})
	}
	return dropped, nil
}

// messageOfTurn maps each gpt turn of turns to the index of the assistant
// message schemas.FromShareGPT made of it in msgs (-1 for every other turn,
// and for all when the two do not line up). It follows FromShareGPT's
// grouping: the system turn is the tools (and a leading system message
// when it holds more), a human turn one user message, a gpt turn one
// assistant message, a tool turn one tool message per result.
func messageOfTurn(turns []schemas.Turn, msgs []schemas.Message) []int {
	out := make([]int, len(turns))
	for i := range out {
		out[i] = -1
	}
	t, m := 0, 0
	if len(turns) > 0 && turns[0].From == fromSystem {
		t = 1
		if len(msgs) > 0 && msgs[0].Role == "system" {
			m = 1
		}
	}
	for ; t < len(turns); t++ {
		switch turns[t].From {
		case fromHuman:
			m++
		case fromGPT:
			if m >= len(msgs) || msgs[m].Role != "assistant" {
				return out[:0]
			}
			out[t] = m
			m++
		case fromTool:
			for m < len(msgs) && msgs[m].Role == "tool" {
				m++
			}
		default:
			return out[:0]
		}
	}
	return out
}

// appendLogprobs appends the row's logprobs column (after a comma).
func appendLogprobs(b []byte, r *row, format string) []byte {
	index := lpTurn
	if format == FormatMessages {
		index = lpMessage
	}
	b = append(b, ',')
	b = appendString(b, columnLogprobs)
	b = append(b, ":["...)
	for i, e := range r.logprobs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendString(b, index)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(e.at), 10)
		b = append(b, `,"tokens":[`...)
		for k, t := range e.lp.Tokens {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendString(b, t)
		}
		b = append(b, `],"logprobs":[`...)
		for k, v := range e.lp.Logprobs {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
		b = append(b, `],"token_ids":[`...)
		for k, v := range e.lp.TokenIDs {
			if k > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, v, 10)
		}
		b = append(b, "]}"...)
	}
	return append(b, ']')
}

// pqMessageLogprobs and pqTurnLogprobs are the entries of the logprobs
// column of the two formats; TokenIDs is empty when the server gave none.
type pqMessageLogprobs struct {
	Message  int64     `parquet:"message"`
	Tokens   []string  `parquet:"tokens,list"`
	Logprobs []float64 `parquet:"logprobs,list"`
	TokenIDs []int64   `parquet:"token_ids,list"`
}

type pqTurnLogprobs struct {
	Turn     int64     `parquet:"turn"`
	Tokens   []string  `parquet:"tokens,list"`
	Logprobs []float64 `parquet:"logprobs,list"`
	TokenIDs []int64   `parquet:"token_ids,list"`
}

// messagesLogprobsRow and shareGPTLogprobsRow are the rows of an export
// with the logprobs column: the format's row (its columns first, the
// embedded struct adding no level) and the column last.
type messagesLogprobsRow struct {
	messagesRow
	Logprobs []pqMessageLogprobs `parquet:"logprobs,list"`
}

type shareGPTLogprobsRow struct {
	shareGPTRow
	Logprobs []pqTurnLogprobs `parquet:"logprobs,list"`
}

var (
	messagesLogprobsSchema = sync.OnceValue(func() *parquet.Schema {
		return parquet.SchemaOf(new(messagesLogprobsRow), messagesConfig())
	})
	shareGPTLogprobsSchema = sync.OnceValue(func() *parquet.Schema {
		return parquet.SchemaOf(new(shareGPTLogprobsRow), shareGPTConfig())
	})
)

// newRowWriter is the Parquet writer of o's rows: the format's row, or with
// o.Logprobs its row with the logprobs column.
func newRowWriter(w io.Writer, o *Options) rowWriter {
	if !o.Logprobs {
		return newParquetWriter(w, o.Format)
	}
	if o.Format == FormatShareGPT {
		return &pqWriter[shareGPTLogprobsRow]{
			w: parquet.NewGenericWriter[shareGPTLogprobsRow](w, writerOptions(shareGPTLogprobsSchema(), shareGPTConfig(), shareGPTLong()...)...),
			fill: func(dst *shareGPTLogprobsRow, r *row) int64 {
				n := fillShareGPT(&dst.shareGPTRow, r)
				dst.Logprobs = dst.Logprobs[:0]
				for _, e := range r.logprobs {
					dst.Logprobs = append(dst.Logprobs, pqTurnLogprobs{Turn: int64(e.at), Tokens: e.lp.Tokens, Logprobs: e.lp.Logprobs, TokenIDs: e.lp.TokenIDs})
				}
				return n + lpBytes(r)
			},
		}
	}
	return &pqWriter[messagesLogprobsRow]{
		w: parquet.NewGenericWriter[messagesLogprobsRow](w, writerOptions(messagesLogprobsSchema(), messagesConfig(), messagesLong()...)...),
		fill: func(dst *messagesLogprobsRow, r *row) int64 {
			n := fillMessages(&dst.messagesRow, r)
			dst.Logprobs = dst.Logprobs[:0]
			for _, e := range r.logprobs {
				dst.Logprobs = append(dst.Logprobs, pqMessageLogprobs{Message: int64(e.at), Tokens: e.lp.Tokens, Logprobs: e.lp.Logprobs, TokenIDs: e.lp.TokenIDs})
			}
			return n + lpBytes(r)
		},
	}
}

// lpBytes is about the bytes the row's logprobs take in a writer's buffers.
func lpBytes(r *row) int64 {
	var n int64
	for _, e := range r.logprobs {
		n += int64(16 * len(e.lp.Tokens))
		for _, t := range e.lp.Tokens {
			n += int64(len(t))
		}
	}
	return n
}

// logprobsFeature is the logprobs column in the card's form.
func logprobsFeature(format string) feature {
	index := lpTurn
	if format == FormatMessages {
		index = lpMessage
	}
	return feature{name: columnLogprobs, list: []feature{{name: index, dtype: "int64"},
		{name: "tokens", seq: "string"}, {name: "logprobs", seq: "float64"}, {name: "token_ids", seq: "int64"}}}
}

// cardLogprobs says in the card what the logprobs column holds, and how
// many entries were left out.
func cardLogprobs(b *strings.Builder, man *Manifest) {
	if !man.Options.Logprobs {
		return
	}
	index := "`turn`, the index of its gpt turn in `conversations`"
	if man.Format == FormatMessages {
		index = "`message`, the index of its assistant message in `messages`"
	}
	fmt.Fprintf(b, "\nThe `logprobs` column holds the token log-probabilities the model endpoint returned for each assistant reply "+
		"(hermes-pipe generate --logprobs): one entry per reply with %s, and `tokens`, `logprobs` and `token_ids` (empty when the server gave none), "+
		"one element per completion token. Replies the endpoint sent without logprobs have no entry.\n", index)
	if man.LogprobsDropped > 0 {
		fmt.Fprintf(b, "\n%d logprobs entr(ies) named no assistant turn of their record (its conversations were changed after, e.g. by compress) and were left out.\n", man.LogprobsDropped)
	}
}
