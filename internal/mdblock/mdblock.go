// Package mdblock finds the fenced code blocks of a Markdown file, for the
// tests that check the guides' programs and configurations.
package mdblock

import "strings"

// Block is one fenced code block.
type Block struct {
	Line int    // of the opening fence, 1-based
	Body string // without the fences, ending in a newline
}

// Fenced returns the blocks fenced as ```lang exactly (```toml, not
// ```toml-fragment), also when the fence is indented inside a list item;
// the indentation is removed from the body.
func Fenced(text, lang string) []Block {
	var out []Block
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(trimmed, "```") {
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		info := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
		var body []string
		j := i + 1
		for ; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				break
			}
			l := lines[j]
			if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
				l = l[indent:]
			}
			body = append(body, l)
		}
		if info == lang {
			out = append(out, Block{Line: i + 1, Body: strings.Join(body, "\n") + "\n"})
		}
		i = j
	}
	return out
}
