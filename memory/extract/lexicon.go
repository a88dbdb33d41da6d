package extract

// Word lists the rule extractor needs. They are closed on purpose: a rule
// fires only when its object is a word it knows (a language, an
// occupation, a mood), so "I'm a bit lost" is no occupation.

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// languages maps a lowercase language word (English names, Russian
// adverbs and case forms) to its English name.
var languages = func() map[string]string {
	m := map[string]string{}
	for _, l := range []string{"English", "Russian", "German", "French", "Spanish", "Italian",
		"Portuguese", "Chinese", "Mandarin", "Cantonese", "Japanese", "Korean", "Arabic", "Hindi",
		"Bengali", "Urdu", "Dutch", "Polish", "Ukrainian", "Turkish", "Swedish", "Norwegian",
		"Danish", "Finnish", "Greek", "Hebrew", "Czech", "Slovak", "Hungarian", "Romanian",
		"Vietnamese", "Thai", "Indonesian", "Malay", "Persian", "Farsi", "Serbian", "Croatian",
		"Bulgarian", "Belarusian", "Kazakh", "Georgian", "Armenian", "Latvian", "Lithuanian",
		"Estonian", "Catalan", "Basque", "Tagalog", "Swahili", "Esperanto", "Latin", "Icelandic",
		"Irish", "Welsh", "Tamil", "Telugu", "Punjabi", "Uzbek", "Azerbaijani", "Mongolian"} {
		m[lower(l)] = l
	}
	for stem, l := range map[string]string{"русск": "Russian", "английск": "English",
		"немецк": "German", "французск": "French", "испанск": "Spanish", "итальянск": "Italian",
		"китайск": "Chinese", "японск": "Japanese", "украинск": "Ukrainian", "польск": "Polish",
		"португальск": "Portuguese", "турецк": "Turkish", "корейск": "Korean", "арабск": "Arabic"} {
		m["по-"+stem+"и"] = l // по-русски
		for _, end := range []string{"ом", "ий", "ого", "ой"} {
			m[stem+end] = l // на русском, русский
		}
	}
	return m
}()

// occupations are nouns (last word of the object) that make "I'm a X" an occupation.
var occupations = set("teacher", "engineer", "developer", "programmer", "coder", "doctor",
	"physician", "nurse", "lawyer", "attorney", "designer", "student", "accountant", "architect",
	"artist", "writer", "author", "journalist", "chef", "cook", "scientist", "researcher",
	"professor", "lecturer", "manager", "consultant", "analyst", "pharmacist", "dentist",
	"electrician", "plumber", "carpenter", "mechanic", "pilot", "driver", "farmer", "musician",
	"photographer", "translator", "interpreter", "therapist", "psychologist", "psychiatrist",
	"economist", "banker", "editor", "firefighter", "officer", "soldier", "veterinarian", "vet",
	"waiter", "waitress", "barista", "cashier", "salesperson", "entrepreneur", "founder", "ceo",
	"cto", "cfo", "freelancer", "librarian", "surgeon", "paramedic", "tutor", "coach", "actor",
	"actress", "dancer", "singer", "secretary", "receptionist", "marketer", "recruiter",
	"administrator", "sysadmin", "tester", "intern", "clerk", "judge", "baker", "butcher",
	"tailor", "technician", "biologist", "chemist", "physicist", "mathematician", "statistician",
	"nanny", "homemaker", "housewife", "builder", "welder", "gardener", "cleaner", "courier",
	"director", "producer", "illustrator", "animator", "contractor", "investor", "trader",
	"broker", "realtor", "agent", "programmer", "sailor", "fisherman", "miner", "optician",
	"midwife", "caregiver", "paralegal", "auditor", "copywriter", "blogger", "streamer",
	"retiree", "pensioner", "postdoc", "pastor", "priest", "rabbi", "imam", "monk")

// religiousOccupations reveal a religion: held like any sensitive claim.
var religiousOccupations = set("pastor", "priest", "rabbi", "imam", "monk")

// diets map a diet word to its value; all are category health (sensitive).
var diets = set("vegetarian", "vegan", "pescatarian", "pescetarian", "gluten-free",
	"lactose-intolerant", "celiac", "coeliac", "diabetic", "keto", "kosher", "halal", "teetotal",
	"teetotaler", "paleo", "dairy-free", "nut-free")

// conditions are health conditions "I have X" names.
var conditions = set("diabetes", "asthma", "adhd", "autism", "epilepsy", "migraines",
	"migraine", "eczema", "arthritis", "depression", "anxiety", "cancer", "hypertension",
	"insomnia", "dyslexia", "celiac", "coeliac", "ibs", "lupus", "psoriasis", "covid", "hiv")

// moods are adjectives of a passing state: "I'm so tired today".
var moods = set("tired", "exhausted", "sleepy", "sad", "happy", "angry", "mad", "upset",
	"stressed", "anxious", "nervous", "worried", "excited", "bored", "frustrated", "lonely",
	"depressed", "annoyed", "grumpy", "great", "good", "fine", "okay", "ok", "awful", "terrible",
	"down", "overwhelmed", "hungry", "cranky", "calm", "relaxed", "confused", "scared", "afraid",
	"glad", "thrilled", "miserable", "furious", "irritated", "cheerful", "sick", "unwell",
	"ill", "drained", "burnt", "burned", "moody", "blue", "fed", "hopeful", "content", "joyful")

// moodAdverbs may stand between "I'm" and a mood.
var moodAdverbs = set("so", "very", "really", "a", "bit", "little", "kind", "kinda", "of",
	"pretty", "super", "extremely", "quite", "too", "totally", "incredibly", "feeling", "just",
	"rather", "somewhat", "sort", "utterly", "absolutely", "completely", "dead", "bloody", "not")

// roles are relations "my X" names; singleRoles have one holder, so the
// relationship key needs no name.
var roles = set("wife", "husband", "spouse", "partner", "boyfriend", "girlfriend", "fiance",
	"fiancee", "fiancé", "fiancée", "mother", "mom", "mum", "father", "dad", "boss",
	"grandmother", "grandfather", "grandma", "grandpa", "friend", "brother", "sister", "son",
	"daughter", "kid", "child", "cousin", "colleague", "coworker", "roommate", "flatmate",
	"neighbor", "neighbour", "aunt", "uncle", "nephew", "niece", "sibling", "parents", "kids",
	"children", "friends", "stepmother", "stepfather", "stepson", "stepdaughter", "grandson",
	"granddaughter", "mentor", "manager", "therapist", "doctor", "dog", "cat")

var singleRoles = set("wife", "husband", "spouse", "partner", "boyfriend", "girlfriend",
	"fiance", "fiancee", "fiancé", "fiancée", "mother", "mom", "mum", "father", "dad", "boss",
	"stepmother", "stepfather", "parents", "therapist", "manager", "mentor", "doctor")

// canonicalRole folds spellings of one relation.
var canonicalRole = map[string]string{"mom": "mother", "mum": "mother", "dad": "father",
	"grandma": "grandmother", "grandpa": "grandfather", "fiancé": "fiance", "fiancée": "fiancee",
	"neighbour": "neighbor", "coworker": "colleague", "flatmate": "roommate", "kids": "children",
	"kid": "child", "friends": "friend"}

// fillers open a clause without changing its meaning.
var fillers = set("hi", "hello", "hey", "well", "so", "oh", "ok", "okay", "btw", "also",
	"and", "but", "please", "pls", "plz", "just", "anyway", "anyways", "um", "uh", "fyi", "ps",
	"then", "yes", "yeah", "yep", "sure", "now", "honestly", "frankly", "basically", "like",
	"ah", "hmm", "alright", "cool", "great", "thanks", "привет", "ну", "кстати", "пожалуйста",
	"и", "а", "да")

// correctionMarkers open a clause that corrects an earlier statement.
var correctionMarkers = set("actually", "correction", "wait", "oops", "sorry", "no", "nope",
	"nah", "rather", "update", "scratch", "instead", "нет", "вернее", "точнее",
	"поправка", "извини", "извините")

// hypotheticals make a clause not a statement of fact.
var hypotheticals = set("if", "unless", "suppose", "supposing", "imagine", "pretend",
	"hypothetically", "whenever", "maybe", "perhaps", "probably", "might", "wish",
	"someday", "если", "бы", "допустим", "представь")

// adverbs may stand between "I" and the verb.
var adverbs = set("really", "absolutely", "totally", "truly", "also", "just", "still",
	"currently", "now", "actually", "genuinely", "definitely", "kind", "kinda", "sort",
	"of", "so", "do", "deeply", "honestly", "personally", "always", "generally", "usually",
	"mostly", "seriously", "very", "much", "strongly", "simply", "recently", "originally",
	"already", "finally", "officially", "too", "even", "sincerely", "certainly", "literally",
	"очень", "тоже", "сейчас", "теперь", "уже")

// likeVerbs and dislikeVerbs carry a sentiment, in first and third person.
var likeVerbs = set("love", "loves", "like", "likes", "enjoy", "enjoys", "adore", "adores",
	"люблю", "обожаю", "нравится")
var dislikeVerbs = set("hate", "hates", "dislike", "dislikes", "detest", "detests", "loathe",
	"loathes", "despise", "despises", "abhor", "abhors", "ненавижу")

// badObjects open an object that is about the conversation, not a taste:
// "I like how you said that", "I love it when", "I hate your answer".
var badObjects = set("it", "this", "that", "these", "those", "how", "what", "when", "where",
	"why", "who", "which", "whether", "you", "your", "yours", "them", "him", "her", "us", "me",
	"myself", "yourself", "one", "ones", "answer", "answers", "response", "responses", "idea",
	"ideas", "suggestion", "suggestions", "reply", "replies", "explanation", "summary", "point",
	"question", "way", "thought", "option", "options", "everything", "nothing", "something",
	"anything", "all", "being", "doing", "having", "if", "so", "because",
	"to", "there", "here", "too", "much", "very", "ты", "тебя", "это", "то", "как", "что",
	"вас", "вы", "твой", "твои", "когда")

// infinitiveStops are verbs after "like to" that make no taste ("I'd like to know").
var infinitiveStops = set("think", "know", "ask", "say", "see", "make", "point", "add",
	"mention", "check", "confirm", "clarify", "understand", "believe", "be", "get", "have",
	"order", "book", "buy", "cancel", "change", "talk", "speak", "go", "try", "learn")

// stopWords end an object: conjunctions, time words, trailing intensifiers.
var stopWords = set("because", "since", "but", "when", "if", "while", "though", "although",
	"unless", "so", "now", "anymore", "too", "either", "lately", "nowadays", "today",
	"tonight", "really", "actually", "currently", "whereas", "until", "till", "as", "than",
	"yet", "which", "who", "where", "whenever", "cause", "cuz", "though", "btw", "honestly",
	"again", "always", "forever", "anyway", "i", "please", "thanks", "lol", "haha", "better",
	"best", "more", "most", "less", "least", "instead", "over",
	"потому", "но", "если", "когда", "сейчас", "теперь", "уже", "больше", "с", "со", "пока",
	"тоже", "и", "а")

// placeStops also end a place: "I live in Paris with my wife for two years".
var placeStops = set("with", "for", "in", "near", "on", "at", "and", "by", "from", "to",
	"since", "last", "this", "alone", "now", "there", "here", "anymore", "right", "recently",
	"permanently", "temporarily", "full-time", "part-time", "these", "back")

// nameStops end a name: "my name is Anna and I ...".
var nameStops = set("and", "but", "by", "from", "btw", "not", "i", "so", "or", "the", "a",
	"is", "im", "am", "nice", "pleased", "thanks", "thank", "please", "here", "now", "just",
	"and", "или", "и", "а", "но")

// badNames are answers that are no name: "call me later", "my name is not important".
var badNames = set("later", "back", "tomorrow", "when", "if", "at", "on", "maybe",
	"sometime", "now", "today", "tonight", "anytime", "please", "crazy", "old-fashioned",
	"whatever", "not", "none", "secret", "unknown", "irrelevant", "important", "a", "an", "the",
	"soon", "again", "asap", "anything", "what", "by", "in", "after", "before", "once", "any",
	"you", "me", "it", "that", "this", "who", "nobody", "no", "nothing", "here", "there",
	"mister", "maybe", "ok", "okay", "tonight", "around")

// months maps English and Russian month words to their number.
var months = map[string]int{"january": 1, "february": 2, "march": 3, "april": 4, "may": 5,
	"june": 6, "july": 7, "august": 8, "september": 9, "october": 10, "november": 11,
	"december": 12, "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8,
	"sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12, "января": 1, "февраля": 2,
	"марта": 3, "апреля": 4, "мая": 5, "июня": 6, "июля": 7, "августа": 8, "сентября": 9,
	"октября": 10, "ноября": 11, "декабря": 12, "январе": 1, "феврале": 2, "марте": 3,
	"апреле": 4, "мае": 5, "июне": 6, "июле": 7, "августе": 8, "сентябре": 9, "октябре": 10,
	"ноябре": 11, "декабре": 12}

// abbreviations keep their dot: "St. Petersburg" is one place, not two sentences.
var abbreviations = set("st", "mr", "mrs", "ms", "dr", "jr", "sr", "mt", "ft", "prof", "vs",
	"etc", "e.g", "i.e", "inc", "ltd", "co", "ave", "blvd", "rd")

// contractions expand to the words they stand for.
var contractions = map[string][]string{
	"i'm": {"i", "am"}, "im": {"i", "am"}, "i've": {"i", "have"}, "ive": {"i", "have"},
	"i'd": {"i", "would"}, "i'll": {"i", "will"}, "don't": {"do", "not"}, "dont": {"do", "not"},
	"doesn't": {"does", "not"}, "doesnt": {"does", "not"}, "didn't": {"did", "not"},
	"didnt": {"did", "not"}, "isn't": {"is", "not"}, "aren't": {"are", "not"},
	"wasn't": {"was", "not"}, "can't": {"can", "not"}, "cant": {"can", "not"},
	"cannot": {"can", "not"}, "won't": {"will", "not"}, "wouldn't": {"would", "not"},
	"haven't": {"have", "not"}, "hasn't": {"has", "not"}, "it's": {"it", "is"},
	"that's": {"that", "is"}, "let's": {"let", "us"}, "you're": {"you", "are"},
	"we're": {"we", "are"}, "they're": {"they", "are"}, "he's": {"he", "is"},
	"she's": {"she", "is"}, "what's": {"what", "is"}, "there's": {"there", "is"},
	"i`m": {"i", "am"}, "you'd": {"you", "would"}, "we'd": {"we", "would"},
	"couldn't": {"could", "not"}, "shouldn't": {"should", "not"},
}

// greetings open an introduction: "Hi, I'm Anna".
var greetings = set("hi", "hello", "hey", "привет", "здравствуйте")

// conversationNouns in a liked object make it a comment on the chat.
var conversationNouns = set("answer", "answers", "response", "responses", "reply", "replies",
	"version", "approach", "format", "formatting", "wording", "tone", "example", "examples",
	"result", "results", "solution", "output", "draft", "suggestion", "suggestions", "idea",
	"ideas", "explanation", "summary", "chat", "conversation", "advice", "option", "options",
	"button", "page", "screen", "site", "website", "app", "interface", "ui", "font", "layout",
	"menu", "link", "feature", "bot", "assistant")

// jokes mark a clause as not meant: "I'm allergic to meetings lol".
var jokes = set("lol", "lmao", "rofl", "jk", "haha", "hahaha", "kidding", "joking", "😂", "🤣")
